"""perfmodel.measure._lifeline: no orphaned sweep workers (issue 14 #4).

A live stale worker is refused, dead run directories are removed, a live sweep's directory is left alone, and
killing a sweep's process group kills its worker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import SRC

from perfmodel.exceptions import MeasurementError


class TestOrphanWorkers:
    def _dead_pid(self):
        p = subprocess.Popen([sys.executable, "-c", "pass"])
        p.wait()
        return p.pid

    def test_live_stale_worker_refused_dead_dirs_removed(self, tmp_path):
        from perfmodel.measure._lifeline import check_stale_workers

        gone = tmp_path / "perfmodel-run-gone"
        gone.mkdir()
        (gone / "owner.json").write_text(json.dumps({"sweep_pid": self._dead_pid(), "worker_pgid": self._dead_pid()}))
        assert check_stale_workers(tmp_path) == [gone] and not gone.exists()
        stale = tmp_path / "perfmodel-run-stale"
        stale.mkdir()
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(stale)],
                                  start_new_session=True)
        try:
            (stale / "owner.json").write_text(json.dumps({"sweep_pid": self._dead_pid(), "worker_pgid": worker.pid}))
            with pytest.raises(MeasurementError, match=f"still running \\(pid {worker.pid}"):
                check_stale_workers(tmp_path)
        finally:
            worker.kill()
            worker.wait()
        assert check_stale_workers(tmp_path) == [stale]

    def test_live_sweeps_dirs_are_left_alone(self, tmp_path):
        from perfmodel.measure._lifeline import check_stale_workers

        mine = tmp_path / "perfmodel-run-mine"
        mine.mkdir()
        (mine / "owner.json").write_text(json.dumps({"sweep_pid": os.getpid(), "worker_pgid": os.getpid()}))
        assert check_stale_workers(tmp_path) == [] and mine.exists()

    @pytest.mark.slow
    def test_killing_the_sweep_group_kills_its_worker(self, tmp_path):
        pytest.importorskip("torch")
        env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": SRC}
        out = tmp_path / "runs.csv"
        # a fixed 200,000 steps (minutes): the adaptive budget stops early on a quiet machine, and a worker that
        # has finished leaves no run directory to find stale
        sweep = subprocess.Popen([sys.executable, "-m", "perfmodel", "measure", "--models", "mlp-xs",
                                  "--batch-sizes", "2", "--steps", "200000",
                                  "--output", str(out)], env=env, start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        owner = None
        deadline = time.time() + 120
        while time.time() < deadline and owner is None:
            found = list(tmp_path.glob("perfmodel-run-*/owner.json"))
            owner = json.loads(found[0].read_text()) if found else None
            time.sleep(0.2)
        assert owner is not None
        time.sleep(3)  # the worker is importing torch / measuring
        os.killpg(sweep.pid, signal.SIGKILL)
        sweep.wait()
        deadline = time.time() + 20
        alive = True
        while alive and time.time() < deadline:
            try:
                os.killpg(owner["worker_pgid"], 0)
                time.sleep(0.2)
            except ProcessLookupError:
                alive = False
        assert not alive, "the worker outlived its sweep"
        from perfmodel.measure._lifeline import check_stale_workers

        assert len(check_stale_workers(tmp_path)) == 1 and not list(tmp_path.glob("perfmodel-run-*"))
