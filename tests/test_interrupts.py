"""SIGTERM ends a command as Ctrl-C does (trek.interrupts), installed before every trek command."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

from typer.testing import CliRunner

from trek.cli import app

CHILD = textwrap.dedent("""
    import os, signal, sys, time
    from trek.interrupts import terminate_as_interrupt
    print(terminate_as_interrupt(), terminate_as_interrupt(), flush=True)  # installed once; kept the second time
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        print("not interrupted")
    except KeyboardInterrupt as e:
        print("interrupted:", e)
    finally:
        print("cleanup ran")
""")


def test_sigterm_raises_keyboard_interrupt_so_the_same_cleanup_runs():
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert r.stdout.splitlines() == ["True False", "interrupted: stopped by signal SIGTERM", "cleanup ran"], r.stderr


def test_every_trek_command_installs_it():
    before = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        r = CliRunner().invoke(app, ["schema", "trajectory"])
        assert r.exit_code == 0
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler) and handler.__module__ == "trek.interrupts"
    finally:
        signal.signal(signal.SIGTERM, before)
