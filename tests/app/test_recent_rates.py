"""The live host->device rate and hit rate read idle from the first poll after a reply stops, instead of
averaging the last seconds of paging (0.20, 0.18, 0.12 GB/s for ~3 s after Stop)."""

from types import SimpleNamespace

from app.memory.recent_rates import RecentRates

GB = 10**9


def poll(rates, now, hits, misses, h2d, running=1):
    rates.add(now, SimpleNamespace(expert_hits=hits, expert_misses=misses, h2d_bytes=h2d, running=running,
                                   waiting=0))


def test_rates_read_idle_at_the_first_idle_poll():
    rates = RecentRates(window_s=3.0)
    for step in range(10):
        poll(rates, step * 0.25, hits=step * 50, misses=step * 50, h2d=step * GB // 10)
    assert rates.h2d_gb_per_s > 0.3 and rates.hit_rate == 0.5
    poll(rates, 2.6, hits=450, misses=450, h2d=9 * GB // 10, running=0)  # stopped: nothing moves now
    assert rates.h2d_gb_per_s == 0.0 and rates.hit_rate is None
    poll(rates, 2.85, hits=500, misses=450, h2d=GB, running=1)  # the next reply starts a new window
    assert rates.hit_rate == 1.0 and rates.h2d_gb_per_s > 0
