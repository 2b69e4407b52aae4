import pytest

from perfmodel.exceptions import UnknownHardwareError
from perfmodel.hardware import get_spec, known_gpu_types, resolve_gpu_type, spec_table

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
            fp32 = spec.peak_tflops("fp32")
            assert fp32 > 0 and spec.memory_bandwidth_gbps > 0 and spec.interconnect_gbps > 0
            half = spec.peak_tflops("fp16")
            assert half >= fp32
            if spec.bf16_tflops is not None:
                assert spec.bf16_tflops >= spec.peak_tflops("tf32") >= fp32

    def test_known_values(self):
        assert get_spec("A100").peak_tflops("bf16") == 312.0
        assert get_spec("H100 SXM").peak_tflops("bf16") == pytest.approx(989.4)
        assert get_spec("V100").peak_tflops("bf16") is None
        assert get_spec("V100").peak_tflops("tf32") == 15.7  # no TF32 cores: plain fp32

    def test_bad_precision(self):
        with pytest.raises(ValueError, match="precision must be one of"):
            get_spec("A100").peak_tflops("int8")
