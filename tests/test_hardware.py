import re

import pandas as pd
import pytest

from perfmodel import hardware
from perfmodel.exceptions import DeviceSpecError, UnknownHardwareError
from perfmodel.hardware import (
    PRECISIONS,
    _builtin,
    _lookup,
    _registry,
    _spec,
    get_spec,
    known_gpu_types,
    load_devices,
    register_device,
    resolve_gpu_type,
    spec_table,
    unregister_device,
)

REQUIRED = ["V100", "A100-SXM4-40GB", "A100-SXM4-80GB", "A100-PCIE-40GB", "A100-PCIE-80GB", "A10", "A40", "L4",
            "L40S", "T4", "RTX 3090", "RTX 4090", "RTX A6000", "RTX 6000 Ada", "H100 PCIe", "H100 SXM", "H200",
            "B200", "MI250X", "MI300X", "cpu"]


class TestAliases:
    @pytest.mark.parametrize("name", REQUIRED)
    def test_required_devices_resolve(self, name):
        assert resolve_gpu_type(name) in known_gpu_types()

    @pytest.mark.parametrize(
        "reported, canonical",
        [("A100", "A100-SXM4-80GB"), ("A100-SXM4-80GB", "A100-SXM4-80GB"), ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
         ("NVIDIA A100-PCIE-40GB", "A100-PCIE-40GB"), ("NVIDIA A100 80GB PCIe", "A100-PCIE-80GB"),
         ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"), ("Tesla T4", "T4"), ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
         ("NVIDIA H100 PCIe", "H100-PCIE-80GB"), ("NVIDIA H200", "H200-SXM-141GB"),
         ("NVIDIA GeForce RTX 4090", "RTX-4090"), ("NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada"),
         ("AMD Instinct MI300X", "MI300X"), ("CPU", "cpu")],
    )
    def test_nvml_names(self, reported, canonical):
        assert resolve_gpu_type(reported) == canonical

    def test_unknown_lists_closest(self):
        with pytest.raises(UnknownHardwareError, match=r"Unknown gpu_type 'A1000'.*Closest known names: .*A100"):
            resolve_gpu_type("A1000")

    def test_unknown_is_value_error(self):
        with pytest.raises(ValueError):
            get_spec("TPU v9")

    def test_not_a_string(self):
        with pytest.raises(TypeError, match="gpu_type must be a str"):
            resolve_gpu_type(100)


class TestTable:
    def test_every_row_has_a_source(self):
        table = spec_table()
        assert table["source"].str.len().min() > 10

    def test_peaks_ordered_and_positive(self):
        for name in known_gpu_types():
            spec = get_spec(name)
            if name == "cpu":
                assert spec.peak_tflops("fp32") is None
                continue
            if spec.vendor in ("google", "intel"):
                # TPUs and Gaudi: vendors publish bf16 (and fp8) matrix peaks only, no FP32/FP16 figure.
                assert spec.fp32_tflops is None and spec.bf16_tflops > 0 and spec.memory_bandwidth_gbps > 0
                continue
            fp32 = spec.peak_tflops("fp32")
            assert fp32 > 0 and spec.memory_bandwidth_gbps > 0 and spec.interconnect_gbps > 0
            half = spec.peak_tflops("fp16")
            assert half >= fp32
            if spec.bf16_tflops is not None:
                assert spec.bf16_tflops >= spec.peak_tflops("tf32") >= fp32
            if spec.fp8_tflops is not None:
                assert spec.fp8_tflops >= spec.bf16_tflops

    def test_known_values(self):
        assert get_spec("A100").peak_tflops("bf16") == 312.0
        assert get_spec("H100 SXM").peak_tflops("bf16") == pytest.approx(989.4)
        assert get_spec("V100").peak_tflops("bf16") is None
        assert get_spec("V100").peak_tflops("tf32") == 15.7  # no TF32 cores: plain fp32

    def test_bad_precision(self):
        with pytest.raises(ValueError, match="precision must be one of"):
            get_spec("A100").peak_tflops("int8")

    def test_every_row_has_architecture_and_year(self):
        table = spec_table()
        gpus = table.drop(index="cpu")
        assert gpus["architecture"].notna().all()
        assert gpus["release_year"].between(2016, 2026).all()
        assert {"pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna1", "cdna2", "cdna3",
                "gaudi2", "gaudi3", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e"} <= set(gpus["architecture"])

    def test_new_columns_in_table(self):
        assert {"fp8_tflops", "architecture", "release_year", "interconnect", "interconnect_gbps"} <= set(
            spec_table().columns)

    def test_uncertain_figures_say_so(self):
        assert "UNCERTAIN" in get_spec("A10G").source and "UNCERTAIN" in get_spec("Gaudi2").source

    def test_network_only_where_a_source_states_it(self):
        table = spec_table()
        assert "network_gbps" in table.columns and list(table.columns)[-3:] == ["network_gbps", "nvlink_domain",
                                                                               "source"]
        known = table[table["network_gbps"].notna()]
        # every figure is cited in the row's source text, with the per-device figure it states
        for name, row in known.iterrows():
            assert "scale-out network:" in row["source"], name
            assert re.search(rf"(?<![\d.]){re.escape(f'{row.network_gbps:g}')} GB/s per ", row["source"]), name
        # the reference systems named in the issue: DGX A100 8x 200 Gb/s HDR, DGX H100 8x 400 Gb/s NDR
        assert get_spec("A100").network_gbps == 25.0 and get_spec("A100-SXM4-40GB").network_gbps == 25.0
        assert get_spec("H100").network_gbps == 50.0
        # left empty where no reference system's network is stated (PCIe cards, TPUs, the CPU)
        assert get_spec("H100 PCIe").network_gbps is None and get_spec("TPU v5p").network_gbps is None
        assert get_spec("cpu").network_gbps is None and len(known) < len(table) / 2


REQUIRED_NEW = ["P100", "P100-SXM2-16GB", "V100-SXM2-16GB", "V100-PCIE-16GB", "A10G", "A30", "L40", "H100 NVL",
                "H200 NVL", "GH200", "GB200", "RTX 2080 Ti", "Titan RTX", "Quadro RTX 6000", "Quadro RTX 8000",
                "RTX 3070", "RTX 3080", "RTX A4000", "RTX A4500", "RTX A5000", "RTX A5500", "MI100", "MI210",
                "MI250", "MI250-GCD", "MI250X-GCD", "MI325X", "Gaudi 2", "Gaudi 3", "TPU v4", "TPU v5e",
                "TPU v5p", "TPU v6e"]


class TestResolution:
    @pytest.mark.parametrize("name", REQUIRED_NEW)
    def test_new_devices_resolve(self, name):
        assert resolve_gpu_type(name) in known_gpu_types()

    @pytest.mark.parametrize("reported, canonical", [
        ("Tesla P100-PCIE-16GB", "P100-PCIE-16GB"), ("Tesla P100-SXM2-16GB", "P100-SXM2-16GB"),
        ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"), ("Tesla V100-PCIE-16GB", "V100-PCIE-16GB"),
        ("Tesla V100S-PCIE-32GB", "V100S-PCIE-32GB"), ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
        ("NVIDIA GeForce RTX 3090", "RTX-3090"), ("NVIDIA GeForce RTX 2080 Ti", "RTX-2080-Ti"),
        ("NVIDIA TITAN RTX", "TITAN-RTX"), ("Quadro RTX 8000", "Quadro-RTX-8000"),
        ("Quadro RTX 6000", "Quadro-RTX-6000"), ("NVIDIA RTX A5000", "RTX-A5000"), ("NVIDIA L40", "L40"),
        ("NVIDIA L40S", "L40S"), ("NVIDIA H100 NVL", "H100-NVL-94GB"), ("NVIDIA H200 NVL", "H200-NVL-141GB"),
        ("NVIDIA GH200 480GB", "GH200-96GB"), ("NVIDIA GH200 144G HBM3e", "GH200-144GB"), ("NVIDIA A10G", "A10G"),
        ("NVIDIA A10", "A10"), ("NVIDIA A30", "A30"), ("NVIDIA B200", "B200"),
    ])
    def test_nvml_names(self, reported, canonical):
        assert resolve_gpu_type(reported) == canonical

    @pytest.mark.parametrize("reported, canonical", [
        ("AMD Instinct MI100", "MI100"), ("AMD Instinct MI210", "MI210"),
        ("AMD Instinct MI250X/MI250", "MI250X-GCD"), ("Aldebaran/MI200 [Instinct MI250X/MI250]", "MI250X-GCD"),
        ("AMD Instinct MI300X", "MI300X"), ("AMD Instinct MI325X", "MI325X"), ("MI250X", "MI250X"),
        ("Instinct MI250", "MI250"), ("HL-225", "Gaudi2"), ("HL-325L", "Gaudi3"),
    ])
    def test_rocm_and_habana_names(self, reported, canonical):
        assert resolve_gpu_type(reported) == canonical

    @pytest.mark.parametrize("instance, canonical", [
        ("p3.2xlarge", "V100-SXM2-16GB"), ("p3.16xlarge", "V100-SXM2-16GB"), ("p3dn.24xlarge", "V100-SXM2-32GB"),
        ("p4d.24xlarge", "A100-SXM4-40GB"), ("p4de.24xlarge", "A100-SXM4-80GB"), ("p5.48xlarge", "H100-SXM5-80GB"),
        ("p5e.48xlarge", "H200-SXM-141GB"), ("p5en.48xlarge", "H200-SXM-141GB"), ("g4dn.xlarge", "T4"),
        ("g5.12xlarge", "A10G"), ("g6.xlarge", "L4"), ("g6e.48xlarge", "L40S"),
        ("a2-highgpu-8g", "A100-SXM4-40GB"), ("a2-ultragpu-8g", "A100-SXM4-80GB"), ("a3-highgpu-8g", "H100-SXM5-80GB"),
        ("a3-megagpu-8g", "H100-SXM5-80GB"), ("a3-ultragpu-8g", "H200-SXM-141GB"), ("g2-standard-24", "L4"),
        ("nvidia-tesla-a100", "A100-SXM4-80GB"), ("nvidia-h100-mega-80gb", "H100-SXM5-80GB"),
        ("v5litepod-16", "TPU-v5e"), ("v5e", "TPU-v5e"), ("v5p-128", "TPU-v5p"), ("v4-32", "TPU-v4"),
        ("v6e-8", "TPU-v6e"), ("tpu-v5-lite-podslice", "TPU-v5e"),
        ("Standard_ND96asr_v4", "A100-SXM4-40GB"), ("Standard_ND96amsr_A100_v4", "A100-SXM4-80GB"),
        ("Standard_NC24ads_A100_v4", "A100-PCIE-80GB"), ("Standard_ND96isr_H100_v5", "H100-SXM5-80GB"),
        ("Standard_ND96isr_MI300X_v5", "MI300X"), ("ND A100 v4", "A100-SXM4-40GB"), ("ND H100 v5", "H100-SXM5-80GB"),
        ("NC A100 v4", "A100-PCIE-80GB"), ("ND MI300X v5", "MI300X"), ("Standard_ND96isr_H200_v5", "H200-SXM-141GB"),
        ("Standard_NC40ads_H100_v5", "H100-NVL-94GB"), ("Standard_NC4as_T4_v3", "T4"), ("NCasT4_v3", "T4"),
        ("Standard_ND40rs_v2", "V100-SXM2-32GB"), ("Standard_NC6s_v3", "V100-PCIE-16GB"),
        ("p6-b200.48xlarge", "B200"), ("a4-highgpu-8g", "B200"), ("a4x-highgpu-4g", "GB200"),
    ])
    def test_cloud_instance_types(self, instance, canonical):
        assert resolve_gpu_type(instance) == canonical

    def test_ambiguous_rtx_6000_is_not_guessed(self):
        with pytest.raises(UnknownHardwareError, match="Quadro-RTX-6000|RTX-6000-Ada"):
            resolve_gpu_type("RTX 6000")

    def test_variants_never_resolve_to_siblings(self):
        assert resolve_gpu_type("H100 NVL 94GB") == "H100-NVL-94GB"
        assert resolve_gpu_type("NVIDIA H100 PCIe 80GB") == "H100-PCIE-80GB"
        assert resolve_gpu_type("V100 PCIe 16GB") == "V100-PCIE-16GB"

    def test_unknown_says_how_to_register(self):
        with pytest.raises(UnknownHardwareError, match=r"Closest known names: .*register_device.*PERFMODEL_DEVICES"):
            resolve_gpu_type("H300 SXM")

    def test_per_gcd_rows_are_half_a_package(self):
        pkg, gcd = get_spec("MI250X"), get_spec("AMD Instinct MI250X/MI250")
        assert gcd.bf16_tflops == pytest.approx(pkg.bf16_tflops / 2, rel=1e-3)
        assert gcd.memory_gb == pkg.memory_gb / 2

    def test_fp8_peak(self):
        assert get_spec("H100").peak_tflops("fp8") == pytest.approx(1978.9)
        assert get_spec("MI300X").peak_tflops("fp8") == pytest.approx(2614.9)
        assert get_spec("A100").peak_tflops("fp8") is None  # no FP8 tensor cores: no fall-back
        assert get_spec("cpu").peak_tflops("fp8") is None
        assert "fp8" in PRECISIONS

    def test_lookup_is_cached(self):
        resolve_gpu_type("NVIDIA H100 80GB HBM3")
        assert _lookup.CACHE["NVIDIA H100 80GB HBM3"] == "H100-SXM5-80GB"


def test_every_bundled_mlperf_accelerator_name_resolves_to_its_device():
    # the accelerator names MLPerf's system descriptions use (bundled with the rows derived from them), each to
    # the device type the bundled row was given: bare, or with a bracketed power limit (the importer's rule)
    from perfmodel.datasets import bundled_data_dir
    from perfmodel.importers.mlperf.devices import resolve_device

    pairs = pd.read_csv(bundled_data_dir() / "mlperf_steps.csv")[["accelerator_name", "gpu_type"]].drop_duplicates()
    assert len(pairs) >= 15
    wrong = [(name, gpu, resolve_device(name)) for name, gpu in pairs.itertuples(index=False)
             if resolve_device(name) != gpu]
    assert wrong == []
    # the names without a bracketed note are resolve_gpu_type's own work (the importer only strips the note)
    bare = [(name, gpu) for name, gpu in pairs.itertuples(index=False) if "(" not in name or "GB200" in name]
    assert len(bare) >= 15 and all(resolve_gpu_type(name) == gpu for name, gpu in bare)
    assert resolve_gpu_type("NVIDIA Blackwell GPU (GB200)") == "GB200"
    assert resolve_gpu_type("Intel(R) Gaudi(R) 2 AI Accelerator") == "Gaudi2"
    assert resolve_gpu_type("TPU-trillium") == "TPU-v6e"
    assert resolve_gpu_type("AMD Instinct MI325X 256GB HBM3E DLC") == "MI325X"


@pytest.fixture
def clean_registry():
    """Leave the registry as it was: registered devices are process-wide."""
    specs, aliases = dict(_lookup.USER_SPECS), dict(_lookup.USER_ALIASES)
    yield
    _lookup.USER_SPECS.clear()
    _lookup.USER_SPECS.update(specs)
    _lookup.USER_ALIASES.clear()
    _lookup.USER_ALIASES.update(aliases)
    _lookup.CACHE.clear()


class TestTableDigest:
    @pytest.mark.usefixtures("clean_registry")
    def test_digest_follows_the_effective_table(self):
        before = hardware.table_digest()
        assert hardware.table_digest() == before
        register_device(**{**ROW, "name": "DigestX"})
        registered = hardware.table_digest()
        assert registered != before
        unregister_device("DigestX")
        assert hardware.table_digest() == before


ROW = dict(name="X1-96GB", vendor="acme", architecture="xarch", release_year=2026, fp32_tflops=50.0,
           bf16_tflops=400.0, fp8_tflops=800.0, memory_gb=96, memory_bandwidth_gbps=3000,
           interconnect_gbps=400, interconnect="xlink", source="ACME X1 datasheet (2026)")


@pytest.mark.usefixtures("clean_registry")
class TestRegistration:
    def test_register_and_resolve(self):
        spec = register_device(**ROW, aliases=("ACME X1", "acme-x1-96g"))
        assert spec.name == "X1-96GB"
        assert resolve_gpu_type("ACME X1") == resolve_gpu_type("acme_x1_96g") == resolve_gpu_type("x1-96gb") == "X1-96GB"
        assert get_spec("ACME X1").peak_tflops("fp8") == 800.0
        assert get_spec("X1-96GB").peak_tflops("tf32") == 50.0  # no TF32 given: plain fp32
        assert "X1-96GB" in known_gpu_types() and spec_table().loc["X1-96GB", "architecture"] == "xarch"

    def test_unregister(self):
        register_device(**ROW, aliases=["ACME X1"])
        unregister_device("ACME X1")
        with pytest.raises(UnknownHardwareError):
            resolve_gpu_type("X1-96GB")
        with pytest.raises(UnknownHardwareError, match="not a registered device"):
            unregister_device("A100")

    @pytest.mark.parametrize("field, value, exc, match", [
        ("fp32_tflops", -1.0, DeviceSpecError, "'fp32_tflops' field of device 'X1-96GB' must be a positive finite"),
        ("bf16_tflops", float("nan"), DeviceSpecError, "positive finite"),
        ("memory_gb", 0, DeviceSpecError, "'memory_gb'.*positive finite"),
        ("memory_bandwidth_gbps", float("inf"), DeviceSpecError, "positive finite"),
        ("fp8_tflops", "800", TypeError, "'fp8_tflops' field .* must be a positive number or None"),
        ("fp16_tflops", True, TypeError, "positive number or None"),
        ("name", "", DeviceSpecError, "'name' field .* non-empty"),
        ("vendor", None, TypeError, "'vendor' field .* must be a str"),
        ("source", "  ", DeviceSpecError, "'source' field .* non-empty"),
        ("release_year", 26, DeviceSpecError, "between 1990 and 2100"),
        ("release_year", 2026.5, TypeError, "'release_year' field .* int"),
        ("network_gbps", -25.0, DeviceSpecError, "'network_gbps' field .* positive finite"),
        ("network_gbps", "25", TypeError, "'network_gbps' field .* positive number or None"),
    ])
    def test_validation(self, field, value, exc, match):
        with pytest.raises(exc, match=match):
            register_device(**{**ROW, field: value})
        assert "X1-96GB" not in known_gpu_types()

    def test_builtin_rows_pass_the_same_validator(self):
        for name in known_gpu_types():
            _spec._validate(get_spec(name))
        with pytest.raises(DeviceSpecError):
            hardware.HardwareSpec(**{**get_spec("A100").to_dict(), "bf16_tflops": -312.0})

    def test_clash_with_builtin_name_or_alias(self):
        with pytest.raises(DeviceSpecError, match="'a100' already names A100-SXM4-80GB.*replace=True"):
            register_device(**ROW, aliases=["A100"])
        with pytest.raises(DeviceSpecError, match="already a device"):
            register_device(**{**ROW, "name": "H100-SXM5-80GB"})
        with pytest.raises(DeviceSpecError, match="already resolves to A100-PCIE-80GB"):
            register_device(**ROW, aliases=["NVIDIA A100 80GB PCIe HBM2e"])
        assert resolve_gpu_type("A100") == "A100-SXM4-80GB"

    def test_clash_between_registered_devices(self):
        register_device(**ROW, aliases=["acme"])
        with pytest.raises(DeviceSpecError, match="'acme' already names X1-96GB"):
            register_device(**{**ROW, "name": "X2"}, aliases=["ACME"])

    def test_replace_overrides_and_unregister_restores(self):
        register_device(**{**ROW, "name": "A100-SXM4-80GB", "bf16_tflops": 300.0}, replace=True)
        assert get_spec("A100").bf16_tflops == 300.0
        unregister_device("A100-SXM4-80GB")
        assert get_spec("A100").bf16_tflops == 312.0

    def test_bad_aliases(self):
        with pytest.raises(TypeError, match="alias"):
            register_device(**ROW, aliases=[3])
        with pytest.raises(TypeError, match="'replace' parameter"):
            register_device(**ROW, replace="yes")

    def test_fit_and_predict_with_registered_device(self):
        from conftest import make_history

        from perfmodel.models import TrainingTimeModel
        from perfmodel.predict import predict_training_time

        register_device(**ROW, aliases=["ACME X1"])
        hist = make_history().assign(gpu_type="ACME X1")
        fitted = TrainingTimeModel(method="loglinear").fit(hist)
        assert fitted.gpu_types_ == ["X1-96GB"]
        r = predict_training_time("m1", batch_size=16, gpu_type="acme x1", steps=10, history=fitted)
        assert r.seconds > 0
        # carried to a registered device through its peaks from a two-device history
        a = make_history(seed=0)
        b = make_history(seed=0, noise_seed=5).assign(gpu_type="H100", step_time_s=lambda d: d["step_time_s"] / 3)
        two = TrainingTimeModel(method="loglinear").fit(pd.concat([a, b]))
        with pytest.warns(Warning, match="not in the history"):
            r2 = predict_training_time("m1", batch_size=16, gpu_type="ACME X1", steps=10, history=two)
        assert r2.seconds > 0

    def test_unseen_device_without_a_peak_is_refused(self):
        from conftest import make_history

        from perfmodel.models import TrainingTimeModel
        from perfmodel.predict import predict_training_time

        a = make_history(seed=0)
        b = make_history(seed=0, noise_seed=5).assign(gpu_type="H100", step_time_s=lambda d: d["step_time_s"] / 3)
        two = TrainingTimeModel(method="loglinear").fit(pd.concat([a, b]))
        with pytest.raises(ValueError, match="no fp32 peak in the spec table \\(it has: bf16\\)"):
            predict_training_time("m1", batch_size=16, gpu_type="TPU v5e", steps=10, history=two)


@pytest.mark.usefixtures("clean_registry")
class TestDeviceFiles:
    def test_yaml_list_and_devices_key(self, tmp_path):
        yaml = pytest.importorskip("yaml")
        p = tmp_path / "dev.yaml"
        p.write_text(yaml.safe_dump([{**ROW, "aliases": ["ACME X1"]}]))
        assert load_devices(p) == ["X1-96GB"]
        assert resolve_gpu_type("acme x1") == "X1-96GB"
        q = tmp_path / "dev2.yml"
        q.write_text(yaml.safe_dump({"devices": [{**ROW, "name": "X2", "memory_gb": None}]}))
        assert load_devices(q) == ["X2"] and get_spec("X2").memory_gb is None

    def test_csv(self, tmp_path):
        p = tmp_path / "dev.csv"
        p.write_text("name,vendor,bf16_tflops,fp8_tflops,memory_bandwidth_gbps,release_year,aliases,source\n"
                     "X3,acme,400,,3000,2026,ACME X3;x3-oam|acme x3 card,ACME X3 datasheet\n")
        assert load_devices(p) == ["X3"]
        spec = get_spec("acme x3 card")
        assert spec.bf16_tflops == 400.0 and spec.fp8_tflops is None and spec.release_year == 2026
        assert spec.architecture is None  # not given: unknown, never pooled with another device
        assert resolve_gpu_type("x3 oam") == "X3"

    @pytest.mark.parametrize("body, match", [
        ("name,vendor,source,fp32_tflop\nX4,acme,s,1\n", "unknown field.*'fp32_tflop'"),
        ("name,vendor,source,fp32_tflops\nX4,acme,s,fast\n", r"device 1\).*'fp32_tflops' must be a number"),
        ("name,vendor,fp32_tflops\nX4,acme,1\n", "required field 'source'"),
        ("name,vendor,source,fp32_tflops\nX4,acme,s,-1\n", "dev.csv \\(device 1\\).*positive finite"),
        ("name,vendor,source\nX4,acme,s\nX4,acme,s\n", "listed twice"),
        ("name,vendor,source,aliases\nX4,acme,s,A100\n", "'a100' already names.*replace: true"),
    ])
    def test_csv_errors_register_nothing(self, tmp_path, body, match):
        p = tmp_path / "dev.csv"
        p.write_text(body)
        with pytest.raises(DeviceSpecError, match=match):
            load_devices(p)
        assert "X4" not in known_gpu_types()

    def test_csv_network_column_is_optional(self, tmp_path):
        p = tmp_path / "dev.csv"
        p.write_text("name,vendor,bf16_tflops,network_gbps,source\n"
                     "X5,acme,400,25,ACME X5 pod: one 200 Gb/s NIC per device\nX6,acme,400,,ACME X6 datasheet\n")
        assert load_devices(p) == ["X5", "X6"]
        assert get_spec("X5").network_gbps == 25.0 and get_spec("X6").network_gbps is None
        q = tmp_path / "old.csv"  # a file written before the column existed still loads
        q.write_text("name,vendor,bf16_tflops,source\nX7,acme,400,ACME X7 datasheet\n")
        assert load_devices(q) == ["X7"] and get_spec("X7").network_gbps is None
        r = tmp_path / "bad.csv"
        r.write_text("name,vendor,network_gbps,source\nX8,acme,fast,s\n")
        with pytest.raises(DeviceSpecError, match="'network_gbps' must be a number"):
            load_devices(r)
        assert register_device(**ROW, network_gbps=50.0).network_gbps == 50.0

    def test_replace_column(self, tmp_path):
        p = tmp_path / "dev.csv"
        p.write_text("name,vendor,source,bf16_tflops,replace\nL4,nvidia,my measured L4,100,true\n")
        load_devices(p)
        assert get_spec("NVIDIA L4").bf16_tflops == 100.0

    def test_bad_files(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="does not exist"):
            load_devices(tmp_path / "absent.yaml")
        (tmp_path / "d.json").write_text("[]")
        with pytest.raises(DeviceSpecError, match=r"\.yaml, \.yml or \.csv"):
            load_devices(tmp_path / "d.json")
        pytest.importorskip("yaml")
        (tmp_path / "d.yaml").write_text("name: X5\n")
        with pytest.raises(DeviceSpecError, match="list of mappings"):
            load_devices(tmp_path / "d.yaml")

    def test_env_var_read_once_on_first_lookup(self, tmp_path, monkeypatch):
        a, b = tmp_path / "a.csv", tmp_path / "b.csv"
        a.write_text("name,vendor,source,bf16_tflops\nEnvX,acme,env test,10\n")
        b.write_text("name,vendor,source,bf16_tflops,aliases\nEnvY,acme,env test,20,envy card\n")
        monkeypatch.setenv("PERFMODEL_DEVICES", f"{a}{__import__('os').pathsep}{b}")
        monkeypatch.setattr(_registry, "_ENV_STATE", {"loaded": False})
        assert resolve_gpu_type("envy card") == "EnvY" and get_spec("EnvX").bf16_tflops == 10.0
        a.write_text("name,vendor,source,bf16_tflops\nEnvZ,acme,env test,10\n")
        resolve_gpu_type("A100")  # not re-read
        assert "EnvZ" not in known_gpu_types()

    def test_env_var_bad_file_raises_on_lookup(self, tmp_path, monkeypatch):
        monkeypatch.setenv("PERFMODEL_DEVICES", str(tmp_path / "missing.csv"))
        monkeypatch.setattr(_registry, "_ENV_STATE", {"loaded": False})
        for _ in range(2):
            with pytest.raises(FileNotFoundError, match="PERFMODEL_DEVICES: .*missing.csv"):
                resolve_gpu_type("A100")

    def test_two_rows_sharing_an_alias_register_nothing(self, tmp_path):
        """Issue 26 #10: the first row used to stay registered although the file was refused."""
        p = tmp_path / "dev.csv"
        p.write_text("name,vendor,source,bf16_tflops,aliases\nShareA,acme,s,10,shared card\n"
                     "ShareB,acme,s,20,shared card\n")
        with pytest.raises(DeviceSpecError, match="'ShareA' and 'ShareB' both claim.*shared-card.*nothing"):
            load_devices(p)
        assert "ShareA" not in known_gpu_types() and "ShareB" not in known_gpu_types()
        with pytest.raises(UnknownHardwareError):
            resolve_gpu_type("shared card")

    def test_a_failure_while_installing_rolls_back(self, tmp_path, monkeypatch):
        p = tmp_path / "dev.csv"
        p.write_text("name,vendor,source,bf16_tflops\nRollA,acme,s,10\nRollB,acme,s,20\n")
        real, calls = _registry._install, []

        def failing(spec, *a, **k):
            calls.append(spec.name)
            if len(calls) == 2:
                raise MemoryError("simulated")
            return real(spec, *a, **k)

        monkeypatch.setattr(_registry, "_install", failing)
        with pytest.raises(MemoryError):
            load_devices(p)
        assert calls == ["RollA", "RollB"] and "RollA" not in known_gpu_types()

    @pytest.mark.parametrize("suffix", [".csv", ".yaml"])
    def test_non_utf8_file_is_a_clear_error(self, tmp_path, suffix):
        if suffix == ".yaml":
            pytest.importorskip("yaml")
        p = tmp_path / f"dev{suffix}"
        p.write_bytes(b"name,vendor,source\nX\xff\xfe,acme,s\n" if suffix == ".csv"
                      else b"- {name: X\xff, vendor: acme, source: s}\n")
        with pytest.raises(DeviceSpecError, match="not a UTF-8 text file"):
            load_devices(p)

    def test_env_var_non_utf8_file_fails_every_lookup(self, tmp_path, monkeypatch):
        """Issue 26 #10: a TypeError once, then silently ignored; now the same clear error on every lookup."""
        p = tmp_path / "latin1.csv"
        p.write_bytes("name,vendor,source,bf16_tflops\nGerät,acme,s,10\n".encode("latin-1"))
        monkeypatch.setenv("PERFMODEL_DEVICES", str(p))
        monkeypatch.setattr(_registry, "_ENV_STATE", {"loaded": False})
        for _ in range(3):
            with pytest.raises(DeviceSpecError, match="PERFMODEL_DEVICES: .*latin1.csv: not a UTF-8"):
                resolve_gpu_type("A100")

    def test_large_file_loads_in_linear_time(self, tmp_path):
        """Issue 26 #10: 40,000 rows took 76 s (a quadratic duplicate check); 20,000 now take a few seconds."""
        import time

        def write(n):
            p = tmp_path / f"big{n}.csv"
            p.write_text("name,vendor,source,bf16_tflops,aliases\n"
                         + "".join(f"Big{n}x{i},acme,s,10,bigalias{n}x{i}\n" for i in range(n)))
            return p

        small, large = write(2_000), write(20_000)
        t0 = time.perf_counter()
        load_devices(small)
        t1 = time.perf_counter()
        assert len(load_devices(large)) == 20_000
        t2 = time.perf_counter()
        assert resolve_gpu_type("bigalias20000x19999") == "Big20000x19999"
        assert t2 - t1 < 30 and (t2 - t1) < 25 * (t1 - t0) + 2  # 10x the rows, not 100x the time

    def test_env_var_in_fresh_process(self, tmp_path):
        import os
        import subprocess
        import sys

        p = tmp_path / "d.csv"
        p.write_text("name,vendor,source,bf16_tflops,memory_bandwidth_gbps\nProcX,acme,env test,10,100\n")
        env = {**os.environ, "PERFMODEL_DEVICES": str(p)}
        out = subprocess.run([sys.executable, "-m", "perfmodel", "hardware", "ProcX"], env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "ProcX" in out.stdout and "env test" in out.stdout


class TestFp8Precision:
    def test_history_accepts_fp8(self):
        from conftest import make_history

        from perfmodel.schema import validate_runs

        runs = validate_runs(make_history().assign(gpu_type="H100", precision="FP8"))
        assert set(runs["precision"]) == {"fp8"}

    def test_zoo_sweep_refuses_fp8(self):
        from perfmodel.measure.sweep import RunConfig

        with pytest.raises(ValueError, match="'fp8' cannot be measured by the zoo"):
            RunConfig(model="mlp-xs", batch_size=2, gpu_count=1, precision="fp8", device="cuda")

    def test_fp8_runs_fit_with_hardware_peaks(self):
        from conftest import make_history

        from perfmodel.models import TrainingTimeModel
        from perfmodel.predict import predict_training_time

        a = make_history(seed=0).assign(gpu_type="H100", precision="fp8")
        b = make_history(seed=0, noise_seed=5).assign(gpu_type="MI300X", precision="fp8",
                                                       step_time_s=lambda d: d["step_time_s"] / 1.3)
        fitted = TrainingTimeModel(method="loglinear").fit(pd.concat([a, b]))
        with pytest.warns(Warning, match="not in the history"):
            r = predict_training_time("m1", batch_size=16, gpu_type="B200", precision="fp8", steps=10, history=fitted)
        assert r.seconds > 0
        with pytest.raises(ValueError, match="no fp8 peak"):
            predict_training_time("m1", batch_size=16, gpu_type="A100", precision="fp8", steps=10, history=fitted)


class TestMigSlices:
    @pytest.mark.parametrize("name, parent", [
        ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", "A100-SXM4-40GB"),
        ("NVIDIA A100-SXM4-80GB MIG 1g.10gb", "A100-SXM4-80GB"),
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", "H100-SXM5-80GB"),
        ("MIG 2g.12gb", None),
    ])
    def test_refused_with_what_it_is(self, name, parent):
        with pytest.raises(UnknownHardwareError, match="MIG slices are not supported yet") as info:
            resolve_gpu_type(name)
        msg = str(info.value)
        assert name in msg and "register_device" in msg
        if parent:
            assert f"of {parent}" in msg
        assert "Closest known names" not in msg  # not mistaken for a typo of the parent

    def test_predict_refuses_a_mig_slice(self):
        import perfmodel

        with pytest.raises(UnknownHardwareError, match="MIG slice"):
            perfmodel.predict_training_time("gpt-s", batch_size=8, gpu_type="NVIDIA A100-SXM4-40GB MIG 3g.20gb",
                                            steps=100)

    @pytest.mark.usefixtures("clean_registry")
    def test_a_registered_slice_resolves(self):
        register_device(**{**ROW, "name": "A100-MIG-3g.20gb", "vendor": "nvidia", "architecture": "ampere",
                           "source": "test row"}, aliases=["NVIDIA A100-SXM4-40GB MIG 3g.20gb"])
        assert resolve_gpu_type("NVIDIA A100-SXM4-40GB MIG 3g.20gb") == "A100-MIG-3g.20gb"


def test_nvlink_domain_only_where_a_source_states_it():
    from perfmodel.hardware import spec_table

    table = spec_table()
    stated = table[table["nvlink_domain"].notna()]
    assert set(stated.index) == {"GB200", "GB300"} and (stated["nvlink_domain"] == 72).all()
    assert all("NVLink domain of 72 GPUs" in src for src in stated["source"])
    with pytest.raises(DeviceSpecError, match="'nvlink_domain'"):
        register_device(name="X-NVL", vendor="x", source="test", bf16_tflops=1.0, nvlink_domain=0)


class TestBundledTable:
    """Issue 37: the built-in rows are the bundled ``data/device_specs.csv``; every row loads, validates, cites."""

    @staticmethod
    def _rows():
        import csv
        from importlib import resources

        text = resources.files("perfmodel").joinpath("data").joinpath(_builtin.TABLE_FILE).read_text("utf-8")
        reader = csv.DictReader(text.splitlines())
        rows = list(reader)
        assert tuple(reader.fieldnames) == _builtin.FILE_COLUMNS
        return rows

    def test_every_row_loads_and_validates(self):
        rows = self._rows()
        assert len(rows) == len(_builtin.BUILTIN) >= 60
        assert [r["name"] for r in rows] == known_gpu_types()[:len(rows)]
        for row, spec in zip(rows, _builtin.BUILTIN):
            assert None not in row and None not in row.values()  # one cell per column
            assert spec.name == row["name"] and _builtin.BUILTIN_BY_NAME[spec.name] is spec
            _spec._validate(spec)
            for field in hardware.FIELDS:  # an empty cell is None, any other reads back as written
                value = getattr(spec, field)
                assert (row[field] == "") == (value is None), (spec.name, field)
                if value is not None:
                    assert str(value) == row[field], (spec.name, field)

    def test_every_row_names_its_source(self):
        for row in self._rows():
            assert len(row["source"].strip()) > 20, row["name"]
            assert get_spec(row["name"]).source == row["source"]

    def test_names_and_aliases_are_unique_and_resolve(self):
        rows = self._rows()
        names = [r["name"] for r in rows]
        assert len({n.lower() for n in names}) == len(names)
        owner = {}
        for row in rows:
            assert resolve_gpu_type(row["name"]) == row["name"]
            for alias in row["aliases"].split(";") if row["aliases"] else []:
                assert alias == _lookup.candidates(alias)[0], f"{alias!r} is not written as a lookup key"
                assert owner.setdefault(alias, row["name"]) == row["name"], f"{alias!r} listed twice"
                assert resolve_gpu_type(alias) == row["name"]
        for name in names:  # a device's own name never names another device
            assert owner.get(name.lower(), name) == name

    def test_a_malformed_table_is_refused(self):
        header = ",".join(_builtin.FILE_COLUMNS)
        with pytest.raises(DeviceSpecError, match="header"):
            _builtin.read_table("name,vendor,source\nX,acme,s\n")
        with pytest.raises(DeviceSpecError, match="line 2"):
            _builtin.read_table(header + "\nX,acme\n")
        def line(**cells):
            return header + "\n" + ",".join(cells.get(c, "") for c in _builtin.FILE_COLUMNS) + "\n"

        base = {"name": "X", "vendor": "acme", "interconnect": "k", "source": "s"}
        with pytest.raises(DeviceSpecError, match="'fp32_tflops' .* must be a positive"):
            _builtin.read_table(line(**base, fp32_tflops="-1"))
        specs, aliases = _builtin.read_table(line(**base, fp32_tflops="16", tf32_tflops="125.0", aliases="x1;x-one"))
        assert specs[0].fp32_tflops == 16 and isinstance(specs[0].fp32_tflops, int)  # as written: the digest
        assert isinstance(specs[0].tf32_tflops, float) and specs[0].architecture is None
        assert aliases == {"x1": "X", "x-one": "X", "x": "X"}
