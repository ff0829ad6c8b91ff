"""The expert modes are one typed registry that still reads and prints as the CLI and API spell it."""

import json

import pytest

from engine.config import EngineOptions
from engine.errors import RequestError
from engine.expert_modes import ExpertMode, names


def test_user_spellings_become_modes_and_print_as_written():
    options = EngineOptions(experts="paged")
    assert options.experts is ExpertMode.PAGED
    assert f"--experts {options.experts}" == "--experts paged"
    assert json.dumps({"mode": options.experts}) == '{"mode": "paged"}'
    assert names() == ("resident", "paged", "static")


@pytest.mark.parametrize("spelling", ["Paged", "remote", "llama.cpp", ""])
def test_anything_else_is_refused_naming_the_modes(spelling):
    with pytest.raises(RequestError, match="resident, paged, static"):
        EngineOptions(experts=spelling)


def test_what_each_mode_allows():
    assert [mode.can_resplit for mode in (ExpertMode.RESIDENT, ExpertMode.PAGED, ExpertMode.STATIC)] == [
        False, True, False]
    assert not ExpertMode.RESIDENT.keeps_experts_on_host and ExpertMode.STATIC.keeps_experts_on_host
