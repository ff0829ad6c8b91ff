"""bench/phases_replay.py: the online controller on the phase-switching workload, replayed at the routing level."""

import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location("phases_replay", Path(__file__).parents[2] / "bench" / "phases_replay.py")
phases_replay = importlib.util.module_from_spec(spec)
spec.loader.exec_module(phases_replay)


def test_kv_follows_the_phases_and_the_chats_get_the_slots(capsys):
    phases_replay.main(["--budget", "24", "--burst", "8x6144+16", "--chat", "3x256+128", "--max-len", "8192",
                        "--cycles", "1"])
    out = capsys.readouterr().out
    moves = [line for line in out.splitlines() if line.startswith("  ")]
    assert len(moves) == 2  # KV for the burst, then back to the floor; no re-share worth less than its stall
    kv_after = float(moves[-1].split(" -> ")[1].split(" GiB")[0])
    assert 0.75 <= kv_after < 0.77  # after the chats: one request's floor (8192 x 96 KiB), the rest to experts
    slots = [int(move.split("| slots ")[1].split()[0]) for move in moves]
    assert slots[1] > slots[0]  # the chats run with the slots the burst's KV gave back
