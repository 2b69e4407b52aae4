"""A submission's launch configs: which of a benchmark's ``config_*.sh`` files is a system's (:func:`select_configs`),
what they set through the files they source (:class:`Configs`), and the precision they state
(:func:`implementation_precision`).

A submission's code and launch configs sit next to its results: ``<submitter>/benchmarks/<benchmark>/
implementations/<impl>/config_*.sh`` (shell files exporting the run's settings, e.g. ``export FP8=True``, or
passing flags in ``EXTRA_PARAMS``). Where a log does not state its precision, the config of the run's system
may; the layout of a language model's run is read from the same config (:mod:`.layout`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from .devices import PCIE_DEVICE, config_names_device, device_model
from .log import as_int

__all__ = ["Configs", "implementation_precision", "implementation_text", "is_implementation_file",
           "select_configs"]

CONFIG_FILE = re.compile(r"^config.*\.sh$", re.I)
README_FILE = re.compile(r"^readme.*\.md$", re.I)
#: ``source <...>/name.sh`` / ``. name.sh``: matched on a line's first :data:`SOURCE_SPAN` characters only, so
#: that a very long line costs no more than a short one (the lazy ``.*?`` would be quadratic in its length).
SOURCE_LINE = re.compile(r"^(?:source|\.)\s+[^\n]{0,300}?([\w.+-]{1,200}\.sh)\b")
SOURCE_SPAN = 600
_FP8_ASSIGN = re.compile(r"^(?:export\s+)?FP8=(.*)$")
#: A ``--flag``, with the value it is given where one follows (``--fp8=False``, ``--fp8 0``).
_FLAG = re.compile(r"(?<![\w-])--([A-Za-z][\w-]*)(?:=(['\"]?)([^\s'\"]*)\2|\s+(['\"]?)([^\s'\"-][^\s'\"]*)\4)?")
_UNSET = re.compile(r"^unset\s+(?:-v\s+)?(.*)$")
_SHELL_DEFAULT = re.compile(r"^\$\{[A-Za-z_]\w*:?[-=]([^}]*)\}$")
_CONFIG_REF = re.compile(r"(?<![\w*.-])(config_[\w.+-]*?\.sh)\b(?!\*)")
_FOLDER_REF = re.compile(r"\]\(\.\./([^)/\s]+)/?\)")
_FP8_HELP = re.compile(r"^\s*(?:enables?|use)\s+fp8\b", re.I)
_TRUE, _FALSE = frozenset({"true", "1", "yes", "on"}), frozenset({"false", "0", "no", "off", ""})
MAX_PY_CHARS = 1_000_000
#: Configs longer than this are not read (they state nothing): a launch config is a few kilobytes.
MAX_SH_CHARS = 1_000_000
#: Configs sourcing each other deeper than this state nothing (a real chain is two or three files deep).
MAX_SOURCE_DEPTH = 32


def is_implementation_file(path: str) -> bool:
    """Whether a file of a benchmark's implementations is read (for the precision and the layout), by its name.

    Parameters
    ----------
    path : str
        The file's path (only its name counts): ``config*.sh`` launch configs, ``README*.md`` files (which name
        a system's config), ``*.py`` files (whose command-line flags' help texts say what a flag does, and whose
        NeMo code reads its config), ``run_and_time.sh`` (the launch script: settings passed to NeMo) and
        ``*.yaml`` / ``*.yml`` files (NeMo configs bound to the launch config's variables).

    Returns
    -------
    bool
        True for a file worth reading.
    """
    name = str(path).replace("\\", "/").rsplit("/", 1)[-1]
    return bool(CONFIG_FILE.match(name) or README_FILE.match(name) or name.endswith((".py", ".yaml", ".yml"))
                or name == "run_and_time.sh")


def implementation_text(path: str, text: str) -> str | None:
    """The text of an implementation file as it is read, or None to drop it.

    Parameters
    ----------
    path : str
        The file's path (only its name counts).
    text : str
        Its contents.

    Returns
    -------
    str or None
        ``text``; None for a Python or YAML file longer than 1,000,000 characters, a Python file that neither
        defines a command-line flag (``add_argument``) nor is NeMo code (``nemo``), and a YAML file that binds
        no setting to an environment variable (no ``oc.env``).
    """
    name = str(path)
    if name.endswith((".py", ".yaml", ".yml")) and len(text) > MAX_PY_CHARS:
        return None
    if name.endswith(".py") and "add_argument" not in text and "nemo" not in text:
        return None
    if name.endswith((".yaml", ".yml")) and "oc.env" not in text:
        return None
    return text


def selection_files(files: Mapping[str, str]) -> dict[str, str]:
    """The files a system's config is chosen from (:func:`select_configs`) and its precision read from: the
    launch configs, the READMEs and the Python files that define command-line flags (``add_argument``); not the
    YAML configs, ``run_and_time.sh`` and other Python files the layout reads (so that they change neither which
    folder is the system's nor what a flag means)."""
    out = {}
    for p, t in files.items():
        name = str(p).replace("\\", "/").rsplit("/", 1)[-1]
        if CONFIG_FILE.match(name) or README_FILE.match(name) or (
                name.endswith(".py") and isinstance(t, str) and "add_argument" in t):
            out[p] = t
    return out


def impl_folder(path: str) -> str:
    """The implementation folder a file is in: the path component after ``implementations``, else the first."""
    parts = path.split("/")
    if "implementations" in parts[:-1]:
        i = parts.index("implementations")
        return parts[i + 1] if i + 1 < len(parts) - 1 else ""
    return parts[0] if len(parts) > 1 else ""


def folder_path(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def shell_value(raw: str) -> str:
    """The value of a shell assignment's right-hand side: quotes, a trailing comment and a ``${X:-v}``
    default around it dropped."""
    v = re.split(r"\s+#", raw.strip(), maxsplit=1)[0].strip().rstrip(";").strip().strip("\"'")
    m = _SHELL_DEFAULT.match(v)
    return m.group(1).strip().strip("\"'") if m else v


class Configs:
    """The launch configs among an implementation's files, how they source each other, what they set, and the
    flags whose argparse help says they enable FP8.

    Parameters
    ----------
    files : mapping of str to str
        Path -> text of a benchmark's implementation files (paths as in the results repository); the launch
        configs are those named ``config*.sh``. A config larger than :data:`MAX_SH_CHARS` is kept as a config
        but not read.
    """

    def __init__(self, files: Mapping[str, str]):
        self.files = {str(p).replace("\\", "/"): t for p, t in files.items() if isinstance(t, str)}
        self.configs = sorted(p for p in self.files if CONFIG_FILE.match(p.rsplit("/", 1)[-1]))
        # a config too large to be one is kept as a config (so that it still counts as a candidate) but not read
        self.oversize = {p for p in self.configs if len(self.files[p]) > MAX_SH_CHARS}
        for p in self.oversize:
            self.files[p] = ""
        self.by_name: dict[str, list[str]] = {}
        for p in self.configs:
            self.by_name.setdefault(p.rsplit("/", 1)[-1].lower(), []).append(p)
        self._help: dict[str, str | None] = {}
        self._settings: dict[str, dict] = {}

    def sourced(self, path: str) -> set[str]:
        """Names (lower case) of the files a config sources.

        Parameters
        ----------
        path : str
            The config.

        Returns
        -------
        set of str
            The file names of its ``source .../name.sh`` / ``. name.sh`` lines.
        """
        out = set()
        for line in self.files[path].splitlines():
            m = SOURCE_LINE.match(line.strip()[:SOURCE_SPAN])
            if m:
                out.add(m.group(1).lower())
        return out

    def resolve(self, name: str, near: Iterable[str] = ()) -> list[str]:
        """The configs of that file name, those in the folders ``near`` first.

        Parameters
        ----------
        name : str
            A config's file name (any case).
        near : iterable of str, default=()
            Folders to look in first, in order.

        Returns
        -------
        list of str
            The configs of that name in the first of ``near`` that has one, else all of them.
        """
        cands = self.by_name.get(name.lower(), [])
        for folder in near:
            here = [c for c in cands if folder_path(c) == folder]
            if here:
                return here
        return cands

    def _sourced_file(self, name: str, by: str) -> str | None:
        """The file a config's ``source .../name`` reads: the one next to it, else the only one of that name in
        its implementation folder, else the only one anywhere (None where that is ambiguous)."""
        cands = self.by_name.get(name.lower(), [])
        for pool in ([c for c in cands if folder_path(c) == folder_path(by)],
                     [c for c in cands if impl_folder(c) == impl_folder(by)], cands):
            if len(pool) == 1:
                return pool[0]
            if pool:
                return None
        return None

    def fp8_flag(self, flag: str) -> str | None:
        """The Python file whose ``add_argument('--flag', action='store_true', help='Enable FP8 ...')`` defines
        a flag.

        Parameters
        ----------
        flag : str
            The flag, without its ``--``.

        Returns
        -------
        str or None
            The file's path; None when no file defines the flag so.
        """
        if flag not in self._help:
            self._help[flag] = None
            pat = re.compile(r"add_argument\(\s*['\"]--" + re.escape(flag) + r"['\"]([^)]{0,600})\)")
            for p, t in sorted(self.files.items()):
                head = t[:MAX_PY_CHARS]
                if not p.endswith(".py") or "--" + flag not in head:
                    continue
                for m in pat.finditer(head):
                    body = m.group(1)
                    h = re.search(r"help\s*=\s*['\"]([^'\"]*)", body)
                    if h and _FP8_HELP.search(h.group(1)) and "store_true" in body:
                        self._help[flag] = p
                        break
                if self._help[flag]:
                    break
        return self._help[flag]

    def settings(self, path: str, _seen: tuple = ()) -> dict:
        """What a config states about its precision and size, following the files it sources in order.

        The value of a setting is None where it is set inside a shell conditional (``if``/``case``/loops: not
        readable without running it). ``FP8`` is a bool (``FP8=True``, a ``--fp8`` flag or a flag whose argparse
        help says it enables FP8; ``FP8=False``, or such a flag given an explicit false value, ``--fp8=False`` /
        ``--fp8 0``: False); ``unset FP8`` removes it. A config larger than :data:`MAX_SH_CHARS`, or whose
        sourcing goes deeper than :data:`MAX_SOURCE_DEPTH` files, gets ``FP8`` None (not readable).

        Parameters
        ----------
        path : str
            The config.

        Returns
        -------
        dict
            ``{"FP8" | "DGXNNODES" | "DGXNGPU": (value, file, line)}``, the last setting of each.
        """
        seen = _seen
        if path in self._settings:
            return self._settings[path]
        if path in seen:
            return {}
        if path in self.oversize:
            return {"FP8": (None, path, f"larger than {MAX_SH_CHARS} characters: not read")}
        if len(seen) >= MAX_SOURCE_DEPTH:
            return {"FP8": (None, path, f"sourced more than {MAX_SOURCE_DEPTH} files deep: not read")}
        out: dict = {}
        depth = 0
        unreadable = None
        for line in self.files[path].splitlines():
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            word = s.split(None, 1)[0].rstrip(";")
            if word in ("if", "case", "for", "while", "until"):
                depth += 1
            elif word in ("fi", "esac", "done"):
                depth = max(0, depth - 1)
            m = SOURCE_LINE.match(s[:SOURCE_SPAN])
            if m:
                target = self._sourced_file(m.group(1), path)
                if target:
                    for k, (v, f, ln) in self.settings(target, seen + (path,)).items():
                        if k == "FP8" and v is None and "not read" in ln:
                            unreadable = (None, f, ln)  # part of the config could not be read: no claim
                        out[k] = (v if depth == 0 else None, f, ln)
                continue
            m = _FP8_ASSIGN.match(s)
            if m:
                v = shell_value(m.group(1)).lower()
                if v in _TRUE or v in _FALSE:
                    out["FP8"] = (v in _TRUE if depth == 0 else None, path, s)
                continue
            m = _UNSET.match(s)
            if m:
                if "FP8" in re.split(r"[\s;]+", m.group(1)):
                    if depth == 0:
                        out.pop("FP8", None)
                    else:
                        out["FP8"] = (None, path, s)
                continue
            m = re.match(r"^(?:export\s+)?(DGXNNODES|DGXNGPU)=(.*)$", s)
            if m:
                v = shell_value(m.group(2))
                out[m.group(1)] = (int(v) if v.isdigit() and depth == 0 else None, path, s)
                continue
            flagged = self._fp8_flag_statement(s)
            if flagged is not None:
                out["FP8"] = (flagged[0] if depth == 0 else None, path, flagged[1])
        if unreadable is not None:
            out["FP8"] = unreadable
        if not seen:
            self._settings[path] = out
        return out

    def _fp8_flag_statement(self, line: str):
        """``(on, excerpt)`` for the first ``--fp8`` flag, or flag whose argparse help says it enables FP8, on a
        line; None where there is none. An explicit false value (``--fp8=False``, ``--fp8 0``, ``--fp8=off``)
        says fp8 is off; any other value, or none (a store_true flag), says it is on."""
        for m in _FLAG.finditer(line):
            flag = m.group(1)
            where = None if flag.lower() == "fp8" else self.fp8_flag(flag)
            if flag.lower() == "fp8" or where:
                value = m.group(3) if m.group(3) is not None else m.group(5)
                on = value is None or value.lower() not in _FALSE
                # the line around the flag (EXTRA_PARAMS lines run long), and where the flag is defined
                excerpt = line if len(line) <= 160 else "..." + line[max(0, m.start() - 60): m.end() + 40] + "..."
                note = "" if where is None else f" (--{flag}: 'Enable FP8' in {where})"
                return on, excerpt + note
        return None

    def variables(self, path: str, _seen: tuple = (), _known: dict | None = None) -> dict:
        """Every shell variable a config sets, following the files it sources in order.

        :func:`assignments` reads a line. A value is None where it cannot be read without running the shell:
        set inside a conditional or loop, computed (``$((...))``, ``$(...)``), or copied from a variable the
        config does not set. ``unset NAME`` removes it.

        Parameters
        ----------
        path : str
            The config.

        Returns
        -------
        dict
            ``{name: (value, file, line)}``, the last setting of each; ``{"*": (None, file, "not read")}`` where
            a config is too large or sourced too deep to be read (what it sets is unknown).
        """
        seen, known = _seen, _known
        out: dict = {} if known is None else known
        if path in seen:
            return out
        if path in self.oversize or len(seen) >= MAX_SOURCE_DEPTH:
            out["*"] = (None, path, "not read")
            return out
        depth = 0
        for line in self.files[path].splitlines():
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            word = s.split(None, 1)[0].rstrip(";")
            if word in ("if", "case", "for", "while", "until"):
                depth += 1
            elif word in ("fi", "esac", "done"):
                depth = max(0, depth - 1)
            m = SOURCE_LINE.match(s[:SOURCE_SPAN])
            if m:
                target = self._sourced_file(m.group(1), path)
                if target:
                    before = dict(out)
                    self.variables(target, seen + (path,), out)
                    if depth:  # sourced inside a conditional: what it sets is not readable
                        for k, v in out.items():
                            if before.get(k) != v:
                                out[k] = (None, v[1], v[2])
                continue
            for name, value in assignments(s, {k: v[0] for k, v in out.items()}):
                if value is _UNSET_VALUE:
                    if depth:
                        out[name] = (None, path, s)
                    else:
                        out.pop(name, None)
                else:
                    out[name] = (value if depth == 0 else None, path, s)
        return out


#: What :func:`assignments` gives for ``unset NAME``.
_UNSET_VALUE = object()
_ASSIGN = re.compile(r"^(?:export\s+|declare\s+-x\s+)?([A-Za-z_]\w*)=(.*)$")
_COLON_DEFAULT = re.compile(r"""^:\s+["']?\$\{([A-Za-z_]\w*):?=([^}]*)\}["']?$""")
_VAR_DEFAULT = re.compile(r"^\$\{([A-Za-z_]\w*)(:?)([-=])([^}]*)\}$")
_VAR_REF = re.compile(r"^\$\{?([A-Za-z_]\w*)\}?$")


def shell_word(raw: str, known: Mapping[str, str | None]):
    """The value of an assignment's right-hand side, with what the config set so far (``known``): a literal
    (quotes and a trailing comment dropped); ``${X:-v}`` / ``${X:=v}``: ``X``'s value where it is set, else
    ``v``; ``$X``: ``X``'s value. None where it is computed or copies a variable not set (or not readable)."""
    v = re.split(r"\s+#", raw.strip(), maxsplit=1)[0].strip().rstrip(";").strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        v = v[1:-1]
    m = _VAR_DEFAULT.match(v)
    if m:
        if m.group(1) in known:
            return known[m.group(1)]
        inner = m.group(4).strip().strip("\"'")
        return None if "$" in inner or "`" in inner else inner
    m = _VAR_REF.match(v)
    if m:
        return known.get(m.group(1))
    return None if "$" in v or "`" in v else v


def assignments(line: str, known: Mapping[str, str | None]) -> list:
    """The variables one line of a config sets, ``[(name, value)]`` in order: ``export A=1``, ``A=1``,
    ``export A=1 && export B=2``, ``: "${A:=1}"`` (where ``A`` is not set yet); ``unset A B`` gives the marker
    value ``_UNSET_VALUE`` for each name. The values are read by :func:`shell_word` (None: not readable)."""
    out: list = []
    seen = dict(known)
    for part in re.split(r"\s*(?:&&|;)\s*", line):
        part = part.strip()
        m = _UNSET.match(part)
        if m:
            for name in re.split(r"\s+", m.group(1).strip()):
                if re.fullmatch(r"[A-Za-z_]\w*", name):
                    out.append((name, _UNSET_VALUE))
                    seen.pop(name, None)
            continue
        m = _COLON_DEFAULT.match(part)
        if m:
            if m.group(1) not in seen:
                value = m.group(2).strip().strip("\"'")
                value = None if "$" in value or "`" in value else value
                out.append((m.group(1), value))
                seen[m.group(1)] = value
            continue
        m = _ASSIGN.match(part)
        if m:
            value = shell_word(m.group(2), seen)
            out.append((m.group(1), value))
            seen[m.group(1)] = value
    return out


def _system_int(system_info: Mapping | None, key: str) -> int | None:
    return as_int(system_info.get(key)) if isinstance(system_info, Mapping) else None


def _readme_choice(cf: Configs, low: str, folders: list[str]) -> tuple[str, list[str]]:
    """Step 2 of :func:`select_configs`: the configs a README of the system names, ``(how, configs)``; where a
    README points to another implementation folder instead, that folder is added to ``folders`` (in place)."""
    own = [p for p in cf.files if README_FILE.match(p.rsplit("/", 1)[-1])
           and p.rsplit("/", 1)[-1].lower() in (f"readme-{low}.md", f"readme_{low}.md")]
    in_folder = [p for p in cf.files if README_FILE.match(p.rsplit("/", 1)[-1])
                 and impl_folder(p) in folders and folder_path(p).rsplit("/", 1)[-1] in folders]
    for readmes in (sorted(own), sorted(set(in_folder) - set(own))):
        names = sorted({n.lower() for r in readmes for n in _CONFIG_REF.findall(cf.files[r])
                        if n.lower() in cf.by_name})
        if names:
            near = [folder_path(r) for r in readmes]
            return "config named by " + ", ".join(readmes), sorted({p for n in names for p in cf.resolve(n, near)})
        for r in readmes:  # a README pointing to another implementation folder
            folders += [d for d in _FOLDER_REF.findall(cf.files[r])
                        if d not in folders and any(impl_folder(p) == d for p in cf.configs)]
    return "", []


def _run_configs(cf: Configs, chosen: list[str], system_info: Mapping | None, how: str) -> tuple[str, list[str]]:
    """Of candidate configs, the run configs for the system's size (steps 3 and 4 of :func:`select_configs`)."""
    sourced = set().union(*(cf.sourced(p) for p in chosen)) if chosen else set()
    runs = [p for p in chosen if p.rsplit("/", 1)[-1].lower() not in sourced]
    runs = [p for p in runs if "DGXNNODES" in cf.settings(p)] or runs
    for key, var, what in (("number_of_nodes", "DGXNNODES", "node"),
                           ("accelerators_per_node", "DGXNGPU", "accelerators per node")):
        want = _system_int(system_info, key)
        stated = [p for p in runs if var in cf.settings(p)]
        if want is not None and stated:
            runs = [p for p in stated if cf.settings(p)[var][0] == want]
            how += f", {want} {what}{'s' if what == 'node' and want != 1 else ''}"
    return how, runs


def select_configs(cf: Configs, system: str, system_info: Mapping | None = None, *, device: str | None = None):
    """The launch configs of a system's run among a benchmark's implementation files.

    The steps are those of :func:`implementation_precision` (which documents them): the config named for the
    system, else the one a README of the system names, else those named for the system or in its implementation
    folder, else those naming the run's device model; in the last two cases only the run configs for the
    system's node and accelerator count.

    Parameters
    ----------
    cf : Configs
        The implementation files.
    system : str
        The system's name.
    system_info : mapping, optional
        The parsed system description (``number_of_nodes``, ``accelerators_per_node``).
    device : str, optional
        The run's device type (for the last step; None skips it).

    Returns
    -------
    tuple of (str, str, list of str) or None
        ``(how, source, configs)``: how the configs were found (in words), ``implementation_config`` where they
        are identified as the system's or ``implementation_configs`` where they are not, and the configs' paths;
        None where none is found.
    """
    if not system or not isinstance(system, str) or not cf.configs:
        return None
    low = system.lower()
    how, source, chosen = "", "implementation_config", []
    exact = cf.by_name.get(f"config_{low}.sh", [])
    prefixed = [p for p in cf.configs if p.rsplit("/", 1)[-1].lower().startswith(f"config_{low}_")]
    folders = sorted({impl_folder(p) for p in cf.files if impl_folder(p).lower() == low})
    own_folders = set(folders)
    if exact:
        how, chosen = "config named for the system", exact
    else:
        how, chosen = _readme_choice(cf, low, folders)
        if not chosen and prefixed:
            how, chosen = "configs named for the system", prefixed
        elif not chosen and folders:
            how = "configs of the implementation folder " + ", ".join(folders)
            chosen = [p for p in cf.configs if impl_folder(p) in folders]
            if any(impl_folder(p) not in own_folders for p in chosen):
                # a README's pointer to another folder (v5.0 Supermicro AS-4126GS-NBR-LCC_N1 -> ../b200_nemo):
                # that folder's configs are other systems', none identified as this system's own
                source = "implementation_configs"
        elif not chosen:  # no config is the system's: those naming its device model, never another device's
            model = device_model(device)
            pcie = bool(device and PCIE_DEVICE.search(device))
            chosen = [p for p in cf.configs if config_names_device(p.rsplit("/", 1)[-1], model, pcie)]
            if not chosen:
                return None
            how, source = f"every config of the benchmark's implementations naming {model}", "implementation_configs"
        if not how.startswith("config named by"):  # candidates: the run configs for the system's size
            how, chosen = _run_configs(cf, chosen, system_info, how)
    if len(chosen) > 1:  # a file another chosen config sources is part of that config
        inner = set().union(*(cf.sourced(p) for p in chosen))
        chosen = [p for p in chosen if p.rsplit("/", 1)[-1].lower() not in inner] or chosen
    if not chosen:
        return None
    return how, source, chosen


def implementation_precision(files: Mapping[str, str], system: str, system_info: Mapping | None = None, *,
                             device: str | None = None):
    """The precision the launch config of a system's run states, from a benchmark's implementation files.

    MLPerf submissions publish, next to the results, ``<submitter>/benchmarks/<benchmark>/implementations/``:
    the code and one launch config per system configuration (``config_<...>.sh``). This finds the config of
    ``system``, in order:

    1. the config named for the system, ``config_<system>.sh``;
    2. the config a README of the system names (``README-<system>.md`` / ``README_<system>.md`` anywhere, or a
       ``README*.md`` in the implementation folder named for the system; such a README may also point to
       another folder, ``[..](../<folder>)``, whose configs are then the candidates);
    3. the configs named ``config_<system>_*.sh``, else those in the implementation folder named for the
       system (or the one its README points to);
    4. failing these, the configs of the benchmark's implementations whose file name names the run's device
       model (``device``: ``H100`` in ``config_DGXH100_64x8x....sh``); none where ``device`` is not given
       (another system's config may be for another device). The name is split into alphanumeric parts and
       one of them must be the model exactly (after a ``DGX``/``HGX`` prefix, a count such as
       ``XE9680x8H100`` or a lower-case prefix such as ``1ccB200``): a B200 run does not take
       ``config_GB200_*``, an H200 run not ``config_GH200_*``, an L4 run not ``config_L40S_*``. The model is
       the device type's first ``-``-separated part (``H100``, ``B200``, ``GB200``, ``L40S``, ``MI300X``),
       the first two joined after a family word (``RTX4090``, ``TPUV5P``). PCIe and SXM parts share a model;
       they are told apart where the name says which: a ``DGX``/``HGX`` prefix or an ``SXM`` part names an
       SXM system and is not taken for a PCIe device (``PCIE`` or ``NVL`` in the device type, e.g.
       ``H100-PCIE-80GB``), a ``PCIE`` part is not taken for an SXM device.

    In 3 and 4, only run configs count (those setting ``DGXNNODES``, else those no other config sources), and
    of those, the ones for the system's ``number_of_nodes`` and ``accelerators_per_node`` where the configs
    state them (``DGXNNODES`` / ``DGXNGPU``, read through the files they source). The config is read with the
    files it sources, in order; it states fp8 by ``FP8=True`` (or 1), by a ``--fp8`` flag, or by a flag whose
    ``argparse`` definition in the implementation's Python code is ``store_true`` with a help text starting
    "Enable FP8" / "Use FP8". A flag given an explicit false value (``--fp8=False``, ``--fp8 0``; false, 0,
    no, off in any case) and ``unset FP8`` after ``FP8=True`` do not state fp8. fp8 is returned only when
    every candidate states it, outside any shell conditional.

    Parameters
    ----------
    files : mapping of str to str
        Path -> text of the implementation files (configs, READMEs, Python files; see
        :func:`is_implementation_file`), paths as in the results repository (``<submitter>/benchmarks/
        <benchmark>/implementations/<impl>/...``) or relative to ``implementations/``.
    system : str
        The system's name (the ``results/<system>/`` folder, ``systems/<system>.json``).
    system_info : mapping, optional
        The parsed system description (``number_of_nodes``, ``accelerators_per_node``).
    device : str, optional
        The run's device type (``perfmodel.hardware`` name, e.g. ``H100-SXM5-80GB``), for step 4: only configs
        whose file name holds its model part (``H100``) are candidates there. None: step 4 is skipped.

    Returns
    -------
    tuple of (str, str, str) or None
        ``("fp8", source, evidence)``: ``source`` is ``implementation_config`` where the config was identified
        as the system's (1-3), ``implementation_configs`` where it was not and every candidate for the system's
        size states fp8: the configs naming the device (4), or those of another folder a README of the system
        points to (3: v5.0 Supermicro ``AS-4126GS-NBR-LCC_N1``'s README points to ``../b200_nemo``, whose
        configs are named for other systems); ``evidence`` names how the configs were found, the config, the file
        and the line that says it. None where no config is found, the candidates disagree, or they do not
        state fp8.

    Raises
    ------
    TypeError
        If ``files`` is not a mapping, or ``device`` is neither a str nor None.

    Notes
    -----
    Only fp8 is read: a config's ``FP8=False`` does not say whether the rest ran in bf16 or fp16. A config
    larger than 1,000,000 characters is not read, and configs sourcing each other more than 32 files deep
    are not followed: such a candidate states nothing (no fp8 claim).
    """
    if not isinstance(files, Mapping):
        raise TypeError(f"implementation_precision expects a mapping of path -> text. Got {type(files).__name__}.")
    if device is not None and not isinstance(device, str):
        raise TypeError(f"implementation_precision expects device as a str (a device type such as "
                        f"'H100-SXM5-80GB') or None. Got {type(device).__name__}.")
    if not system or not isinstance(system, str):
        return None
    cf = Configs(selection_files(files))
    found = select_configs(cf, system, system_info, device=device)
    if found is None:
        return None
    how, source, chosen = found
    statements = [cf.settings(p).get("FP8") for p in chosen]
    stated = [st for st in statements if st is not None and st[0] is True]
    if len(stated) != len(statements):
        return None
    _, where, line = stated[0]
    count = f" (all {len(chosen)} agree)" if len(chosen) > 1 else ""
    evidence = f"{how}: {chosen[0]}{count}; {where}: {line}"
    return "fp8", source, evidence
