"""bench/h2h_table.py: each Wisp row beside llama.cpp's run at its budget, per thread count, ratios both ways."""

import json

from bench import h2h_table

LLAMA = {"threads": "16,8", "prompt": 512,
         "budgets": [{"budget_gib": 12.0, "n_cpu_moe": 20}, {"budget_gib": 24.0, "n_cpu_moe": 0}],
         "rows": [{"n_cpu_moe": 20, "by_threads": {"16": {"pp_tok_s": 1024.0, "tg_tok_s": 50.0},
                                                   "8": {"pp_tok_s": 512.0, "tg_tok_s": 40.0}}},
                  {"n_cpu_moe": 0, "by_threads": {"16": {"pp_tok_s": 5120.0, "tg_tok_s": 200.0}}}]}


def wisp_file(tmp_path, name, link, rows):
    path = tmp_path / name
    path.write_text(json.dumps({"facts": {"link_gbps": link}, "rows": rows}))
    return path


def test_rows_meet_llama_cpp_at_their_budget_per_thread_count(tmp_path):
    paced = wisp_file(tmp_path, "a.json", 25.0, [
        {"arm": "wisp", "budget_gib": 12.0, "prompt": 512, "decode_tok_s": 100.0, "ttft_s": 0.3, "ttft_s_median": 0.25}])
    native = wisp_file(tmp_path, "b.json", None, [
        {"arm": "resident", "budget_gib": None, "prompt": 512, "decode_tok_s": 220.0, "ttft_s": 0.05},
        {"arm": "wisp", "budget_gib": 12.0, "prompt": 2048, "decode_tok_s": 90.0, "ttft_s": 0.9},
        {"arm": "wisp", "budget_gib": 8.0, "prompt": 512, "error": "too small"}])
    lines = h2h_table.table(h2h_table.wisp_rows([paced, native]), LLAMA).splitlines()
    assert len(lines) == 2 + 3  # the failed row is left out
    assert lines[2] == ("| 12 | 25 | wisp | 100.0 | 0.250 | 50.0 (20) | 2.00x | 0.500 | 2.00x "
                        "| 40.0 (20) | 2.50x | 1.000 | 4.00x |")
    assert lines[3].startswith("| 12 | native | wisp p2048 | 90.0 | 0.900 | - |")  # no llama.cpp run at 2,048
    assert lines[4] == "| resident | native | resident | 220.0 | 0.050 | 200.0 (0) | 1.10x | 0.100 | 2.00x | - | - | - | - |"


def test_a_row_decoded_through_a_late_graph_is_marked(tmp_path):
    """A process's fourth CUDA graph and every later one replay slower: such rows say so, so a 2,048-token row of a
    later session is not read as the cost of the longer context."""
    rows = [{"arm": "resident", "budget_gib": None, "prompt": 512, "decode_tok_s": 177.4, "ttft_s": 0.1,
             "cuda_graphs_before": 0},
            {"arm": "resident", "budget_gib": None, "prompt": 2048, "decode_tok_s": 152.9, "ttft_s": 0.2,
             "cuda_graphs_before": 7},
            {"arm": "wisp", "budget_gib": 12.0, "prompt": 512, "decode_tok_s": 123.1, "ttft_s": 0.4}]
    lines = h2h_table.table(h2h_table.wisp_rows([wisp_file(tmp_path, "a.json", None, rows)]), LLAMA).splitlines()
    assert lines[2].startswith("| 12 | native | wisp | 123.1 |")  # no count recorded: not known late
    assert lines[3].startswith("| resident | native | resident | 177.4 |")
    assert lines[4].startswith("| resident | native | resident p2048 (late graph) | 152.9 |")
    assert lines[-1] == h2h_table.LATE_NOTE


def test_a_table_without_late_rows_has_no_note(tmp_path):
    rows = [{"arm": "resident", "budget_gib": None, "prompt": 512, "decode_tok_s": 177.4, "ttft_s": 0.1,
             "cuda_graphs_before": 2}]
    lines = h2h_table.table(h2h_table.wisp_rows([wisp_file(tmp_path, "a.json", None, rows)]), LLAMA).splitlines()
    assert h2h_table.LATE_NOTE not in lines and "(late graph)" not in lines[-1]
