"""The BLAS thread policy (transformer.parallel.threads): which count it picks when, fed synthetic step
times (no real timing here), the environment override, that the limit really reaches BLAS,
and that training gives the same results with one thread and with two."""
import numpy as np
import pytest

from transformer.parallel import threads
from transformer.parallel.threads import AdaptiveThreads, TrainingThreads, blas_setting, blas_threads, decoding_threads

QUIET = {1: 0.082, 2: 0.068}       # step seconds on a quiet 2-core machine (measured 2026-11-23)
ONE_BUSY = {1: 0.077, 2: 0.150}    # ... with one busy background process
VERY_BUSY = {1: 0.250, 2: 4.0}     # ... with a shared machine's heavy load (measured here)


def run(policy, machine, steps):
    """Feed ``policy`` ``steps`` steps whose time depends on the count it chose; return the counts and
    the total seconds. ``machine`` is a dict count -> seconds or a function (step, count) -> seconds."""
    time_of = machine if callable(machine) else (lambda step, count: machine[count])
    chosen, total = [], 0.0
    for step in range(steps):
        count = policy.choose()
        seconds = time_of(step, count)
        policy.record(seconds)
        chosen.append(count)
        total += seconds
    return np.array(chosen), total


# ------------------------------------------------------------------ the setting
@pytest.mark.parametrize("value, expected", [("auto", "auto"), (" AUTO ", "auto"), ("", "auto"), ("1", 1),
                                             (" 2 ", 2), (3, 3)])
def test_blas_setting_accepts_auto_and_positive_counts(value, expected):
    assert blas_setting(value) == expected


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", 0, -2, True, 1.5])
def test_blas_setting_rejects_anything_else_with_one_clear_message(value):
    with pytest.raises(ValueError, match="'auto' or a whole number >= 1"):
        blas_setting(value)


def test_blas_setting_reads_the_environment_and_names_it_in_errors(monkeypatch):
    monkeypatch.delenv(threads.ENV_VAR, raising=False)
    assert blas_setting() == "auto"
    monkeypatch.setenv(threads.ENV_VAR, "1")
    assert blas_setting() == 1
    assert blas_setting("auto") == "auto"            # an explicit argument wins over the environment
    monkeypatch.setenv(threads.ENV_VAR, "many")
    with pytest.raises(ValueError, match=threads.ENV_VAR):
        blas_setting()


# ------------------------------------------------------------- the adaptive rule
def test_warmup_steps_are_not_timed_and_the_first_count_runs_first():
    policy = AdaptiveThreads(warmup=2)
    policy.record(30.0)                              # compilation: would otherwise poison the medians
    policy.record(30.0)
    assert policy.choose() == 1 and not policy.times and sum(policy.steps_with.values()) == 0


def test_a_quiet_machine_runs_two_threads_from_the_ninth_step():
    # 2 untimed steps, 3 timed steps of one thread, a 3-step probe of two that wins: a model
    # whose steps take seconds is not held on one core for long (a benchmark of a few steps
    # at d_model 512 once measured the one-thread steps only)
    chosen, _ = run(AdaptiveThreads(), QUIET, 12)
    assert chosen.tolist() == [1] * 5 + [2] * 7


def test_quiet_machine_settles_on_two_threads():
    chosen, total = run(AdaptiveThreads(), QUIET, 600)
    assert chosen[20:].tolist().count(2) > 0.85 * len(chosen[20:])
    assert chosen[-1] == 2
    assert total < 1.03 * 600 * QUIET[2] + 20 * QUIET[1]     # probes of one thread cost ~2%


def test_probes_on_a_quiet_machine_are_too_rare_to_move_the_p90():
    chosen, _ = run(AdaptiveThreads(), QUIET, 600)
    times = np.array([QUIET[count] for count in chosen[20:]])
    assert np.mean(times != QUIET[2]) < 0.08
    assert np.percentile(times, 90) == QUIET[2]


def test_one_busy_process_keeps_one_thread_and_a_probe_of_two_costs_one_step():
    policy = AdaptiveThreads()
    chosen, total = run(policy, ONE_BUSY, 600)
    assert policy.switches == 0 and chosen[-1] == 1
    twos = np.flatnonzero(chosen == 2)
    assert twos[1] == twos[0] + 1                    # the first probe: its untimed first step, then one
    assert len(twos) >= 3                            # it keeps looking ...
    assert np.all(np.diff(twos[1:]) > 30)            # ... one step at a time, rarely
    assert total < 1.03 * 600 * ONE_BUSY[1]


def test_a_slow_first_step_of_two_threads_does_not_lose_the_first_probe():
    """The first step ever run on two threads pays for the helper thread's memory and caches
    (1.2-2x a later step, measured): it is not timed, and two threads take over at once."""
    def machine(step, count):
        return QUIET[count] * (1.8 if count == 2 and step == 5 else 1.0)

    chosen, _ = run(AdaptiveThreads(), machine, 20)
    assert chosen.tolist() == [1] * 5 + [2] * 15


def test_a_probe_lost_to_one_noisy_step_is_tried_again_soon():
    """On a quiet machine one slow step can lose a probe of two threads; it is tried again after
    the budget's wait (what the lost probe cost, 50 times over: 25 steps here), not after
    min_interval (50) steps as before."""
    def machine(step, count):
        return QUIET[count] * (2.0 if count == 2 and step == 7 else 1.0)   # the probe's third step

    chosen, _ = run(AdaptiveThreads(), machine, 60)
    assert chosen[8] == 1                            # the probe was lost
    back = 8 + np.argmax(chosen[8:] == 2)
    assert back - 8 <= 30 and chosen[back:].tolist().count(1) == 0


def test_a_very_costly_probe_is_not_repeated_within_the_budget():
    policy = AdaptiveThreads(budget=0.02)
    chosen, total = run(policy, VERY_BUSY, 600)
    assert chosen.tolist().count(2) == 1             # 3.75 s lost: the next probe waits ~190 s of steps
    assert total <= 600 * VERY_BUSY[1] + (VERY_BUSY[2] - VERY_BUSY[1])


def test_load_arriving_while_on_two_threads_switches_to_one_within_a_few_steps():
    arrives = 200

    def machine(step, count):
        return (QUIET if step < arrives else VERY_BUSY)[count]

    chosen, _ = run(AdaptiveThreads(), machine, 400)
    assert chosen[arrives - 1] == 2
    slow_steps = np.flatnonzero(chosen[arrives:] == 2)
    assert len(slow_steps) <= 3 and chosen[arrives + 6:].tolist().count(2) == 0


def test_load_leaving_while_on_one_thread_is_found_by_the_next_probe():
    leaves = 200

    def machine(step, count):
        return (ONE_BUSY if step < leaves else QUIET)[count]

    policy = AdaptiveThreads()
    chosen, _ = run(policy, machine, 400)
    assert chosen[leaves - 1] == 1
    back = leaves + np.argmax(chosen[leaves:] == 2)
    assert back - leaves <= 55                        # the next probe: min_interval (50) steps at most
    assert chosen[back + 10:].tolist().count(2) > 0.85 * len(chosen[back + 10:])


def test_a_slow_first_step_of_one_thread_does_not_keep_two_threads_on_a_loaded_machine():
    """Load arrives while on two threads (two workers now wait for each other and the GIL);
    each probe of one thread starts with one slow step (the scheduler's noise): the probe still
    runs its steps and one thread takes over."""
    arrives, previous = 150, [2]

    def machine(step, count):
        first_of_a_probe, previous[0] = count == 1 and previous[0] == 2, count
        if step < arrives:
            return QUIET[count]
        return 0.45 if first_of_a_probe else {1: 0.20, 2: 0.30}[count]   # 0.45 > 1.3x two threads' 0.30

    chosen, _ = run(AdaptiveThreads(), machine, 400)
    assert chosen[arrives - 1] == 2 and chosen[-1] == 1
    assert chosen[arrives + 60:].tolist().count(2) < 10


def test_a_probe_that_is_not_clearly_faster_does_not_switch():
    equal = {1: 0.080, 2: 0.080 * 0.97}               # within the 5% margin
    policy = AdaptiveThreads()
    chosen, _ = run(policy, equal, 300)
    assert policy.switches == 0 and chosen[-1] == 1


def test_noisy_equal_settings_do_not_flip_flop():
    rng = np.random.default_rng(0)
    policy = AdaptiveThreads()
    run(policy, lambda step, count: 0.08 * rng.uniform(0.9, 1.1), 600)
    assert policy.switches <= 4


@pytest.mark.parametrize("options", [dict(counts=(1,)), dict(counts=(2, 2)), dict(window=3, recent=3),
                                     dict(probe_steps=0), dict(budget=0.0), dict(min_interval=0)])
def test_adaptive_rejects_settings_it_cannot_work_with(options):
    with pytest.raises(ValueError, match="AdaptiveThreads"):
        AdaptiveThreads(**options)


# ----------------------------------------------------- the wrapper and BLAS itself
def blas_counts():
    return [lib.num_threads for lib in threads._controller().lib_controllers]


needs_blas = pytest.mark.skipif(not threads._controller().lib_controllers,
                                reason="threadpoolctl finds no BLAS library to limit")


@needs_blas
def test_blas_threads_sets_the_count_and_restores_it():
    before = blas_counts()
    with blas_threads(1):
        assert set(blas_counts()) == {1}
    assert blas_counts() == before


@needs_blas
@pytest.mark.parametrize("setting, expected", [("auto", 1), ("2", 2), ("1", 1)])
def test_decoding_uses_one_thread_unless_forced(monkeypatch, setting, expected):
    monkeypatch.setenv(threads.ENV_VAR, setting)
    with decoding_threads():
        assert set(blas_counts()) == {expected}


@needs_blas
def test_every_decoder_runs_inside_the_decoding_limit(monkeypatch):
    from transformer.models.config import ModelConfig
    from transformer.decoding import inference
    from transformer.models.encoder_decoder import Transformer
    monkeypatch.delenv(threads.ENV_VAR, raising=False)
    model = Transformer(ModelConfig(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32))
    with inference(model):                          # greedy, sampling and beam search all decode inside it
        assert set(blas_counts()) == {1}


def test_training_threads_forced_or_single_core_runs_one_fixed_count(monkeypatch):
    forced = TrainingThreads("2")
    assert forced.policy is None and forced.blas == 2 and forced.current == 1   # the halves one after the other
    monkeypatch.setattr(threads, "blas_default_threads", lambda: 1)   # OPENBLAS_NUM_THREADS=1 or 1 core
    single = TrainingThreads("auto")
    assert single.policy is None and single.current == 1


@needs_blas
def test_training_threads_step_applies_the_chosen_count_and_reports_the_time(monkeypatch):
    monkeypatch.setattr(threads, "blas_default_threads", lambda: 2)
    policy = TrainingThreads("auto", warmup=0)
    for _ in range(3):
        with policy.step() as count:       # auto: BLAS on one thread, the policy picks the halves' workers
            assert count == 1 and set(blas_counts()) == {1} and policy.current == policy.policy.choose() == 1
    assert policy.policy.steps_with[1] == 3 and len(policy.policy.times) == 3
    policy.policy.probing = True           # the other count's turn
    with policy.step():
        assert policy.current == 2 and set(blas_counts()) == {1}


# ------------------------------------------------- same results with either count
def train_default_model(count, steps=3):
    """Default config, batch 128: the products have 1,536 and 2,432 rows, big enough for OpenBLAS to
    split them between threads. Returns the losses, the first step's gradients and the final weights."""
    from transformer.training.trainer import TrainConfig
    from transformer.training.dates import DateTrainer
    trainer = DateTrainer(train_config=TrainConfig(steps=steps, eval_every=0, checkpoint_every=0))
    losses, first_gradients = [], None
    with blas_threads(count):
        for _ in range(steps):
            losses.append(trainer.train_step()["loss"])
            if first_gradients is None:
                first_gradients = {name: p.grad.copy() for name, p in trainer.model.named_parameters()}
    return np.array(losses), first_gradients, trainer.model.state_dict()


@needs_blas
def test_training_with_one_or_two_threads_gives_the_same_model():
    """OpenBLAS sums some rows in another order when it splits a product between two threads, so
    the results agree to float32 rounding, not bit for bit (each count alone is repeatable bit for
    bit). Gradients that are zero in exact arithmetic (attention keys' biases) are rounding noise
    either way, so they are compared against the size of the largest gradient."""
    losses_1, gradients_1, weights_1 = train_default_model(1)
    losses_2, gradients_2, weights_2 = train_default_model(2)
    losses_2_again, gradients_2_again, weights_2_again = train_default_model(2)
    np.testing.assert_allclose(losses_1, losses_2, rtol=1e-5)
    scale = max(float(np.abs(g).max()) for g in gradients_1.values())
    for name in gradients_1:
        np.testing.assert_allclose(gradients_1[name], gradients_2[name], rtol=1e-3, atol=1e-5 * scale,
                                   err_msg=name)
    np.testing.assert_array_equal(losses_2, losses_2_again)
    for name in weights_2:
        np.testing.assert_array_equal(gradients_2[name], gradients_2_again[name], err_msg=name)
        np.testing.assert_array_equal(weights_2[name], weights_2_again[name], err_msg=name)


def test_arithmetic_names_the_blas_kernels_and_the_vector_width(monkeypatch):
    from minigrad.kernels import simd
    text = threads.arithmetic()
    assert text.endswith(f", {simd.VECTOR_BYTES}-byte vectors")
    for library in threads._controller().info():
        assert str(library.get("architecture", "")) in text and str(library.get("version", "")) in text
    other = 32 if simd.VECTOR_BYTES == 64 else 64               # an AVX2 machine's kernels on AVX-512, and back
    monkeypatch.setattr(simd, "VECTOR_BYTES", other)
    assert threads.arithmetic() != text and threads.arithmetic().endswith(f", {other}-byte vectors")
    from minigrad.accelerated import use_backend
    with use_backend("numpy"):                                  # no Numba kernel runs: no vector width
        assert threads.arithmetic().endswith(", numpy's loops")
