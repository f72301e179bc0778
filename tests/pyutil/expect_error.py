"""A call that must fail: with an exception of the given type whose text
holds every one of the given words (shared by the torch tests)."""
import time


def expect_error(fn, words, what, exc=Exception):
    """Runs fn; returns (message, seconds it took to fail). Raises
    AssertionError if fn returns, or its error lacks any of `words`."""
    t0 = time.perf_counter()
    try:
        fn()
    except exc as e:
        msg = str(e)
        missing = [w for w in words if w not in msg]
        if missing:
            raise AssertionError(f"{what}: the error {msg!r} lacks {missing}")
        return msg, time.perf_counter() - t0
    raise AssertionError(f"{what}: no {exc.__name__}")
