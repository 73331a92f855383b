"""Settings shared by every test (and inherited by the subprocesses tests start).

OpenBLAS's results differ in the last bits between one and two threads at the
model's shapes, and the default thread policy (``minigrad/threads.py``) picks
the count by timing. Tests that compare two runs bit for bit (resume equals an
uninterrupted run) therefore pin one BLAS thread; the policy's own tests set
``MINIGRAD_BLAS_THREADS`` themselves with monkeypatch.
"""
import os

os.environ["MINIGRAD_BLAS_THREADS"] = "1"
