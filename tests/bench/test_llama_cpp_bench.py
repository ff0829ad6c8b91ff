"""bench/llama_cpp_bench.py against a stand-in llama-bench: the device buffers read from its verbose log, the
--n-cpu-moe picked for each budget from the base run and the file's expert bytes, and one more layer on the host
when the pick does not fit."""

import json
import stat
import sys

import pytest

from bench import llama_cpp_bench as lcb

LAYER_MIB = [300, 350, 300, 350]  # the stand-in file's experts per layer
BASE_MIB = 1000  # everything else llama.cpp puts on the device
FAKE = f'''#!{sys.executable}
import json, sys
argv = sys.argv
n = int(argv[argv.index("-ncmoe") + 1])
layers = {LAYER_MIB!r}
model = {BASE_MIB - 108} + sum(layers[n:]) + (40 if n == 1 else 0)  # at n = 1 more than the file's bytes
print(f"load_tensors:        CUDA0 model buffer size = {{model:.2f}} MiB", file=sys.stderr)
for kv, compute in ((40.0, 50.0), (48.0, 60.0)):  # one context per test: the largest counts
    print(f"llama_kv_cache:      CUDA0 KV buffer size = {{kv:.2f}} MiB", file=sys.stderr)
    print(f"sched_reserve:      CUDA0 compute buffer size = {{compute:.2f}} MiB", file=sys.stderr)
    print("sched_reserve:  CUDA_Host compute buffer size = 9.00 MiB", file=sys.stderr)
tests = []
for threads in map(int, argv[argv.index("-t") + 1].split(",")):  # llama-bench: one pp and one tg test per count
    tg = 100.0 * threads / 16 / (1 + n)
    tests += [{{"n_prompt": 512, "n_gen": 0, "n_threads": threads, "avg_ts": 900.0, "stddev_ts": 9.0,
               "samples_ts": [900.0]}},
              {{"n_prompt": 0, "n_gen": 64, "n_threads": threads, "avg_ts": tg, "stddev_ts": 1.0, "samples_ts": [tg]}}]
print(json.dumps(tests))
'''


def test_device_buffers_take_each_kind_s_largest_cuda_buffer():
    log = ("CUDA0 model buffer size =   784.42 MiB\nCUDA0 KV buffer size = 48.00 MiB\nCUDA0 compute buffer size = 300.75 MiB"
           "\nCUDA0 compute buffer size = 341.54 MiB\nCUDA_Host compute buffer size = 20.00 MiB\nCPU_Mapped model buffer size = 9.0 MiB")
    assert lcb.device_buffers(log) == {"model": 784.42, "KV": 48.0, "compute": 341.54}


def test_smallest_n_keeps_the_fewest_layers_on_the_host():
    layers = [10, 20, 30]
    assert lcb.smallest_n(5, layers, 65) == 0
    assert lcb.smallest_n(5, layers, 64) == 1  # 5 + 20 + 30 = 55 fits, 65 does not
    assert lcb.smallest_n(5, layers, 35) == 2
    assert lcb.smallest_n(5, layers, 4) == 3  # nothing fits: every layer's experts on the host


@pytest.fixture
def fake_bench(tmp_path, monkeypatch):
    path = tmp_path / "llama-bench"
    path.write_text(FAKE)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(lcb, "expert_bytes_by_layer", lambda model: [mib * lcb.MiB for mib in LAYER_MIB])
    return path


def test_each_budget_gets_the_smallest_n_that_fits_and_is_checked(fake_bench, tmp_path):
    out = tmp_path / "out"
    budgets_mib = [BASE_MIB + 650, BASE_MIB + 1000, BASE_MIB + 2000]  # exact fits: <= counts
    lcb.main(["--bench", str(fake_bench), "--model", "x.gguf", "--out", str(out),
              "--budgets", ",".join(str(mib / 1024) for mib in budgets_mib)])
    result = json.loads((out / "llama_cpp.json").read_text())
    assert result["base_alloc_gib"] * 1024 == pytest.approx(BASE_MIB)  # model + the largest KV and compute
    picks = [b["n_cpu_moe"] for b in result["budgets"]]
    # 650 MiB: layers 2-3 (650) fit; 1000: layers 1-3 (1000) are predicted to fit but measure 40 MiB over -> n = 2;
    # 2000: every layer on the GPU
    assert picks == [2, 2, 0]
    by_n = {row["n_cpu_moe"]: row for row in result["rows"]}
    assert set(by_n) == {4, 2, 1, 0}  # the base, each pick, and the rejected n = 1
    assert by_n[1]["device_alloc_gib"] * 1024 > budgets_mib[1]
    assert by_n[2]["tg_tok_s"] == pytest.approx(100 / 3) and by_n[2]["pp_tok_s"] == 900.0
    table = (out / "llama_cpp.md").read_text()
    assert "| all on host | 4 | 0 |" in table and table.count("| 2 | 2 |") == 2  # two budgets at n = 2
    assert (out / "llama_cpp-ncmoe2.log").read_text().startswith(str(fake_bench))


def test_several_thread_counts_are_one_call_and_one_column_pair_each(fake_bench, tmp_path):
    out = tmp_path / "out"
    lcb.main(["--bench", str(fake_bench), "--model", "x.gguf", "--out", str(out), "--threads", "16,8",
              "--budgets", str((BASE_MIB + 2000) / 1024)])
    result = json.loads((out / "llama_cpp.json").read_text())
    row = next(r for r in result["rows"] if r["n_cpu_moe"] == 0)
    assert "-t 16,8" in row["command"]
    assert row["by_threads"]["16"]["tg_tok_s"] == pytest.approx(100.0) and row["tg_tok_s"] == pytest.approx(100.0)
    assert row["by_threads"]["8"]["tg_tok_s"] == pytest.approx(50.0)
    table = (out / "llama_cpp.md").read_text()
    assert "tg64 tok/s -t 16 | pp512 tok/s -t 8 | tg64 tok/s -t 8 |" in table
    assert "| 900.0 +- 9.0 | 100.00 +- 1.00 | 900.0 +- 9.0 | 50.00 +- 1.00 |" in table


def test_a_later_call_keeps_the_rows_an_earlier_one_measured(fake_bench, tmp_path):
    out, fits_all, fits_two = tmp_path / "out", (BASE_MIB + 2000) / 1024, (BASE_MIB + 650) / 1024
    lcb.main(["--bench", str(fake_bench), "--model", "x.gguf", "--out", str(out), "--budgets", str(fits_all)])
    first = json.loads((out / "llama_cpp.json").read_text())
    fake_bench.write_text(f"#!{sys.executable}\nraise SystemExit(3)\n")  # from now on every run fails
    lcb.main(["--bench", str(fake_bench), "--model", "x.gguf", "--out", str(out),
              "--budgets", f"{fits_all},{fits_two}"])
    result = json.loads((out / "llama_cpp.json").read_text())
    by_n = {row["n_cpu_moe"]: row for row in result["rows"]}
    assert by_n[4] == first["rows"][0] and by_n[0] == first["rows"][1]  # the base and the first budget's, kept
    assert by_n[2]["returncode"] == 3 and "error" in by_n[2]  # only the new budget's run ran
    assert [b["n_cpu_moe"] for b in result["budgets"]] == [0, 2]
    lcb.main(["--bench", str(fake_bench), "--model", "x.gguf", "--out", str(out), "--threads", "8",
              "--budgets", str(fits_all)])  # other settings: nothing kept
    assert all(row["returncode"] == 3 for row in json.loads((out / "llama_cpp.json").read_text())["rows"])
