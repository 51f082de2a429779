"""Ctrl-C anywhere in a ``pairrepro`` process: the project's ``interrupted`` and exit 130, or,
once a command has succeeded, its success and exit 0; never a traceback, and nothing
half-written. Each case is a real process (``python -m pairrepro``, as the console script
runs it) that sends itself SIGINT at a chosen point: while the commands are imported, right
after ``results add`` committed a reference, and while the interpreter exits."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from pairrepro import paths

RESULTS = paths.PROJECT_DIR / "results"

#: Sends SIGINT when module sys.argv[1] is first imported.
ON_IMPORT = """
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == WHEN:
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, CtrlC())
"""
#: Sends SIGINT right after each reference is committed (the copy renamed into place).
AFTER_COMMIT = """
import pairrepro.report.publishing.verify as verify
real = verify.copy_compact
def copy_then_ctrl_c(*args, **kwargs):
    files = real(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGINT)
    return files
verify.copy_compact = copy_then_ctrl_c
"""
#: SIGINT starts ignored (a background job of a shell script); once a reference is committed,
#: every later change of the SIGINT handler is followed by a SIGINT: that lands in the moment
#: between the end of ``results add``'s held block and the end of the command, where a reader
#: of its output, woken by the success line, sends its Ctrl-C (1 time in 4).
AFTER_EACH_HANDLER = """
signal.signal(signal.SIGINT, signal.SIG_IGN)
import pairrepro.report.publishing.verify as verify
real_copy, real_signal, committed = verify.copy_compact, signal.signal, []
def copy_and_note(*args, **kwargs):
    files = real_copy(*args, **kwargs)
    committed.append(1)
    return files
def signal_then_ctrl_c(signum, handler):
    previous = real_signal(signum, handler)
    if committed and signum == signal.SIGINT:
        os.kill(os.getpid(), signal.SIGINT)
    return previous
verify.copy_compact, signal.signal = copy_and_note, signal_then_ctrl_c
"""
#: Sends SIGINT once the main thread has finished: the interpreter is waiting for this
#: (non-daemon) thread in threading._shutdown.
AT_EXIT = """
import threading, time
def ctrl_c_at_exit():
    while threading.main_thread().is_alive():
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.5)
threading.Thread(target=ctrl_c_at_exit).start()
"""


def pairrepro(hook: str, when: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pairrepro ARGS`` with ``hook`` installed first."""
    script = ("import os, runpy, signal, sys\n"
              f"WHEN = {when!r}\n{hook}\n"
              f"sys.argv = ['pairrepro', *{list(args)!r}]\n"
              "runpy.run_module('pairrepro', run_name='__main__', alter_sys=True)\n")
    env = {**os.environ, "PYTHONPATH": str(paths.PROJECT_DIR), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120, cwd=paths.PROJECT_DIR)


def clean_run(runs: Path, recipe: str) -> Path:
    """A committed reference run copied as a finished run of committed code."""
    import json

    run = runs / recipe / "seed-1"
    shutil.copytree(RESULTS / recipe / "seed-1", run)
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    manifest["git"] = {"commit": "0" * 40, "dirty": False, "untracked": []}
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return run


def test_ctrl_c_while_the_commands_are_imported_is_a_clean_interrupt(data_home: Path) -> None:
    """Importing the commands takes a second or two: Ctrl-C then printed a traceback and
    the process died by the signal."""
    out = pairrepro(ON_IMPORT, "pairrepro.report.tables.cells", "fetch", "synthetic")
    assert (out.returncode, out.stderr.strip()) == (130, "interrupted"), out
    assert not (data_home / "raw").exists()


def test_ctrl_c_right_after_a_reference_is_committed_cannot_undo_its_success(
        data_home: Path, tmp_path: Path) -> None:
    """The reference is in place and said so: exit 0. With a second run still to add, the
    first is added and said so, the second is not started, and the exit is 130."""
    runs, results = tmp_path / "runs", tmp_path / "results"
    one = clean_run(runs, "bm25_trecqa")
    out = pairrepro(AFTER_COMMIT, "", "results", "add", str(one), "--results", str(results))
    assert out.returncode == 0, out
    assert f"-> {results / 'bm25_trecqa' / 'seed-1'}" in out.stdout
    assert "interrupted" not in out.stderr and "Traceback" not in out.stderr
    assert (results / "bm25_trecqa" / "seed-1" / "result.json").is_file()

    shutil.rmtree(results)
    two = clean_run(runs, "bm25_twitter_url")
    out = pairrepro(AFTER_COMMIT, "", "results", "add", str(one), str(two), "--results",
                    str(results))
    assert (out.returncode, out.stderr.strip()) == (130, "interrupted"), out
    assert out.stdout.count(" -> ") == 1 and (results / "bm25_trecqa" / "seed-1").is_dir()
    assert sorted(p.name for p in results.iterdir()) == ["bm25_trecqa"]
    assert [p.name for p in (results / "bm25_trecqa").iterdir()] == ["seed-1"]


def test_ctrl_c_just_after_results_add_printed_success_keeps_it(data_home: Path,
                                                                tmp_path: Path) -> None:
    """The held block put back the KeyboardInterrupt handler before the command ended: a
    Ctrl-C in between was exit 130 after the success line."""
    one = clean_run(tmp_path / "runs", "bm25_trecqa")
    results = tmp_path / "results"
    out = pairrepro(AFTER_EACH_HANDLER, "", "results", "add", str(one), "--results",
                    str(results))
    assert (out.returncode, out.stderr) == (0, ""), out
    assert out.stdout.count(" -> ") == 1 and (results / "bm25_trecqa" / "seed-1").is_dir()


def test_ctrl_c_while_the_process_exits_keeps_the_commands_outcome(data_home: Path) -> None:
    """After a success, Ctrl-C during the interpreter's exit printed "Exception ignored in
    threading._shutdown" and the process died by the signal (130 in a shell)."""
    out = pairrepro(AT_EXIT, "", "fetch", "synthetic")
    assert out.returncode == 0, out
    assert "synthetic: complete" in out.stdout and out.stderr == "", out
