"""bench/phases_replay.py: the online controller on the phase-switching workload, replayed at the routing level."""

import importlib.util
import re
from pathlib import Path

from engine.units import parse_size

spec = importlib.util.spec_from_file_location("phases_replay", Path(__file__).parents[2] / "bench" / "phases_replay.py")
phases_replay = importlib.util.module_from_spec(spec)
spec.loader.exec_module(phases_replay)


def test_kv_follows_the_phases_and_the_chats_get_the_slots(capsys):
    phases_replay.main(["--budget", "12", "--burst", "4x7000+64", "--chat", "2x256+128", "--max-len", "8192",
                        "--cycles", "2"])
    out = capsys.readouterr().out
    moves = [line for line in out.splitlines() if line.startswith("  ")]
    # Each phase's split is made at its admission barrier: the chats' slots before chat0 and chat1 start (their
    # 128 decode steps pay for the stall), the burst's KV before burst1 is admitted; nothing else is worth a stall.
    assert len(moves) == 3 and all(move.startswith("  admission:") for move in moves)
    kv_after = [parse_size(re.search(r"KV [\d.]+ \w+ -> ([\d.]+ \w+)", move)[1].replace(" ", "")) / 2**30
                for move in moves]
    assert 0.75 <= kv_after[0] < 0.77 and 0.75 <= kv_after[2] < 0.77  # one request's floor (8192 x 96 KiB)
    assert kv_after[1] >= 4 * 7064 * 96 / 2**20  # the whole burst's KV, in GiB
    assert "128 decode steps the waiting requests will run" in moves[0]
    slots = [int(move.split("| slots ")[1].split()[0]) for move in moves]
    assert slots[0] > slots[1] < slots[2]  # the chats run with the slots the burst's KV gave back
