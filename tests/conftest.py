"""Settings shared by every test (and inherited by the subprocesses tests start).

OpenBLAS's results differ in the last bits between one and two threads at the
model's shapes. Training uses one BLAS thread by default (``minigrad/threads.py``),
but a user's ``MINIGRAD_BLAS_THREADS`` would reach the tests that compare two runs
bit for bit (resume equals an uninterrupted run), so the suite pins one thread; the
thread tests set ``MINIGRAD_BLAS_THREADS`` themselves with monkeypatch, and
test_repeatable_runs.py runs without it, as a user would.
"""
import os

os.environ["MINIGRAD_BLAS_THREADS"] = "1"
