"""One step of the ramp for one library, in a process of its own.

    python _ramp_worker.py CONFIG_JSON

CONFIG_JSON: {"library", "threads", "seconds", "target": {...Target fields}}.
Starts ``threads`` threads together; each runs sessions back to back until
``seconds`` have passed (at least one each). Prints JSON lines on stdout:
{"event": "start", "version"}, one {"event": "session", "thread", "time",
"ops" | "error"} per session as it ends, and {"event": "end", "cpu", "wall"}.
The parent does all storing and sending, so this process only measures.

Run as a script (not ``-m``) so that it works under a peer's virtualenv:
``sessions.py`` beside it is imported as a plain module.
"""
import json
import resource
import sys
import threading
import time

from sessions import Target, library_version, thread_runner

# A thread whose sessions keep failing stops instead of spinning on errors.
MAX_CONSECUTIVE_ERRORS = 5

_out = threading.Lock()


def emit(record: dict) -> None:
    line = json.dumps(record) + "\n"
    with _out:
        sys.stdout.write(line)
        sys.stdout.flush()


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    config = json.loads(sys.argv[1])
    library, count, seconds = config["library"], config["threads"], config["seconds"]
    target = Target(**config["target"])
    emit({"event": "start", "library": library, "version": library_version(library)})
    start_line = threading.Barrier(count + 1)
    deadline = [0.0]

    def thread_main(index: int) -> None:
        run = thread_runner(library)
        start_line.wait()
        sessions = errors = 0
        while sessions == 0 or time.monotonic() < deadline[0]:
            started = time.time()
            try:
                ops = run(target)
            except Exception as err:  # reported per session, the run goes on
                errors += 1
                emit({"event": "session", "thread": index, "time": started,
                      "error": f"{type(err).__name__}: {err}"})
                if errors >= MAX_CONSECUTIVE_ERRORS:
                    return
            else:
                errors = 0
                emit({"event": "session", "thread": index, "time": started, "ops": ops})
            sessions += 1

    threads = [threading.Thread(target=thread_main, args=(i,), daemon=True)
               for i in range(count)]
    for thread in threads:
        thread.start()
    cpu_before, wall_before = _cpu_seconds(), time.perf_counter()
    deadline[0] = time.monotonic() + seconds
    start_line.wait()
    for thread in threads:
        thread.join()
    emit({"event": "end", "cpu": _cpu_seconds() - cpu_before,
          "wall": time.perf_counter() - wall_before})
    return 0


if __name__ == "__main__":
    sys.exit(main())
