"""Another team's requests while a hostile team does its worst (issue 11).

Starts Redis, `grader serve` (gunicorn, its default processes and threads) and a grading
worker (SQLite in a temporary directory unless --database-url names an empty database),
makes two teams, hostile and victim, and times the victim's requests one round after
another at a steady rate (a round every --interval seconds): POST /v1/submissions, GET
/v1/submissions/<its id>, GET /v1/account.

1. idle: --rounds rounds on the otherwise idle service;
2. under attack: the same, while the hostile team at once sends a batch of --batch items
   (one request), --long-polls concurrent `POST /v1/submissions?wait=60` and a stream of
   2 MiB patches (--streams senders, one after another each, until the victim is done).

It prints p50 / p99 / max of each request type, idle and under attack, measured in the
same run, and p99(attack) / p99(idle) against the target of 3 at most; then what the
hostile team got back: its answers by status, and its long-polls held (answered after
their wait) or answered at once (the service would not hold them: a Grader-Wait header
says why, or the verdict was there already). And where the machine's CPU went in each
phase (the API, the worker, PostgreSQL, this process's clients, everything else): on a
shared machine a ratio means little without how much of the machine the service had.

Every patch is unique (the cache cannot answer) and cheap: refused by the vetting (a path
outside the repository), PATCH FAILED without a container, so this measures the service.
The hostile team's quotas are lifted (GRADER_DAILY_QUOTA, GRADER_QUEUED_QUOTA): what is
measured is whether its requests hold the API, not whether a quota stops them first.

    .venv/bin/python benchmarks/fairness.py
    .venv/bin/python benchmarks/fairness.py --postgres      # a private PostgreSQL server (fsync off)
    .venv/bin/python benchmarks/fairness.py --database-url postgresql+psycopg://USER@HOST/EMPTY_DB
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import requests

from _service import (
    ROOT,
    TASK,
    Running,
    cheap_patch,
    cpu_seconds,
    descendants,
    machine_cpu,
    percentile,
    private_postgres,
)

OUT = ROOT / "benchmarks" / "out"
TARGET = 3.0  # the victim's p99 under attack, at most this many times its p99 idle
KINDS = ("POST /v1/submissions", "GET /v1/submissions/<id>", "GET /v1/account")
TIMEOUT = 120.0  # a victim request that takes longer counts as this long (and as a timeout)


class Victim:
    """One client, one keep-alive connection, one round after another."""

    def __init__(self, url: str, key: str):
        self.url = url
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {key}"
        self.n = 0

    def _timed(self, method: str, path: str, **kw) -> tuple[float, int, float, dict | None]:
        """(milliseconds, status, when it was sent on the monotonic clock, the JSON body)."""
        t = time.monotonic()
        try:
            r = self.http.request(method, self.url + path, timeout=TIMEOUT, **kw)
            code, body = (
                r.status_code,
                (r.json() if r.headers.get("Content-Type", "").startswith("application/json") else None),
            )
        except requests.RequestException:
            code, body = 0, None
        return (time.monotonic() - t) * 1000, code, t, body

    def rounds(
        self, count: int, interval: float, tag: str, limit: float = float("inf")
    ) -> dict[str, list[tuple[float, int, float]]]:
        """`count` rounds, fewer if `limit` seconds run out first: (ms, status, sent at) each."""
        out: dict[str, list[tuple[float, int, float]]] = {k: [] for k in KINDS}
        start = time.monotonic()
        for i in range(count):
            if time.monotonic() - start > limit:
                break
            time.sleep(max(0.0, start + i * interval - time.monotonic()))  # a steady rate, never a burst
            self.n += 1
            ms, code, at, body = self._timed(
                "POST", "/v1/submissions", json={"task_id": TASK, "patch": cheap_patch(f"victim-{tag}-{self.n}")}
            )
            out[KINDS[0]].append((ms, code, at))
            sid = body.get("id") if isinstance(body, dict) else None
            if sid:
                out[KINDS[1]].append(self._timed("GET", f"/v1/submissions/{sid}")[:3])
            out[KINDS[2]].append(self._timed("GET", "/v1/account")[:3])
        return out


class Hostile:
    """The attack: one large batch, many long-polls, a stream of oversized patches."""

    def __init__(self, url: str, key: str, args: argparse.Namespace):
        self.url, self.args = url, args
        self.headers = {"Authorization": f"Bearer {key}"}
        self.codes: dict[str, Counter] = {"batch": Counter(), "long-poll": Counter(), "2 MiB patch": Counter()}
        self.batch: dict = {}
        self.polls: list[dict] = []  # one per long-poll: seconds, status, held, why not held
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        self.threads = [threading.Thread(target=self._batch, daemon=True)]
        self.threads += [
            threading.Thread(target=self._stream, args=(s,), daemon=True) for s in range(self.args.streams)
        ]
        self.threads.append(threading.Thread(target=self._long_polls, daemon=True))
        for t in self.threads:
            t.start()

    def _count(self, what: str, code: int) -> None:
        with self.lock:
            self.codes[what][code] += 1

    def _batch(self) -> None:
        items = [{"task_id": TASK, "patch": cheap_patch(f"hostile-{i}")} for i in range(self.args.batch)]
        t = time.monotonic()
        try:
            r = requests.post(f"{self.url}/v1/submissions/batch", json=items, headers=self.headers, timeout=900)
            code, accepted = r.status_code, r.json().get("accepted")
        except (requests.RequestException, ValueError):
            code, accepted = 0, None
        self.batch = {
            "status": code,
            "accepted": accepted,
            "seconds": round(time.monotonic() - t, 1),
            "began": t,
            "ended": time.monotonic(),
        }
        self._count("batch", code)

    def _long_polls(self) -> None:
        time.sleep(self.args.poll_delay)  # the batch's first chunks go in first: the polls wait behind them
        with ThreadPoolExecutor(self.args.long_polls) as pool:
            list(pool.map(self._long_poll, range(self.args.long_polls)))

    def _long_poll(self, i: int) -> None:
        http = requests.Session()  # a connection of its own, as 200 clients would have
        t = time.monotonic()
        try:
            r = http.post(
                f"{self.url}/v1/submissions?wait=60",
                json={"task_id": TASK, "patch": cheap_patch(f"hostile-poll-{i}")},
                headers=self.headers,
                timeout=180,
            )
            code, why = r.status_code, r.headers.get("Grader-Wait")
        except requests.RequestException:
            code, why = 0, None
        seconds = time.monotonic() - t
        with self.lock:
            self.polls.append({"seconds": seconds, "status": code, "not_held": why})
        self._count("long-poll", code)

    def _stream(self, s: int) -> None:
        http = requests.Session()
        n = 0
        while not self.stop.is_set():
            n += 1
            body = json.dumps({"task_id": TASK, "patch": cheap_patch(f"hostile-big-{s}-{n}", pad=2 * 2**20)})
            try:
                code = http.post(
                    f"{self.url}/v1/submissions",
                    data=body,
                    timeout=180,
                    headers={**self.headers, "Content-Type": "application/json"},
                ).status_code
            except requests.RequestException:
                code = 0
            self._count("2 MiB patch", code)

    def finish(self, timeout: float) -> None:
        self.stop.set()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))


def summary(ms: list[float]) -> dict:
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 1),
        "p99_ms": round(percentile(ms, 0.99), 1),
        "max_ms": round(max(ms), 1),
    }


def held_or_not(polls: list[dict], at_once: float) -> dict:
    """Long-polls answered within `at_once` seconds or with a Grader-Wait header were not held."""
    not_held = [p for p in polls if p["not_held"] or p["seconds"] < at_once]
    held = [p for p in polls if p not in not_held]
    return {
        "sent": len(polls),
        "held": len(held),
        "held_until_verdict": sum(1 for p in held if p["status"] == 200),
        "held_until_wait_ran_out": sum(1 for p in held if p["status"] == 202),
        "held_seconds_p50_max": [
            round(statistics.median(p["seconds"] for p in held), 1),
            round(max(p["seconds"] for p in held), 1),
        ]
        if held
        else None,
        "answered_at_once": len(not_held),
        "why_not_held": dict(Counter(p["not_held"] or f"HTTP {p['status']} within {at_once:g} s" for p in not_held)),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100, help="victim rounds (POST, GET, GET) per phase")
    ap.add_argument("--interval", type=float, default=0.2, help="seconds from one victim round's start to the next's")
    ap.add_argument("--batch", type=int, default=10_000, help="items in the hostile team's batch")
    ap.add_argument("--long-polls", type=int, default=200, help="the hostile team's concurrent ?wait=60 POSTs")
    ap.add_argument("--streams", type=int, default=2, help="senders of 2 MiB patches, one after another each")
    ap.add_argument("--poll-delay", type=float, default=0.5, help="seconds after the batch the long-polls start")
    ap.add_argument(
        "--attack-limit",
        type=float,
        default=150.0,
        help="seconds after which the victim's rounds under attack stop, however many are done",
    )
    ap.add_argument("--workers", type=int, default=1, help="grading worker processes")
    ap.add_argument("--postgres", action="store_true", help="on a private PostgreSQL server (fsync off)")
    ap.add_argument("--database-url", default=None, help="an empty database [default: SQLite in a temporary dir]")
    ap.add_argument("--out", default=str(OUT / "fairness.json"), help="where the figures are written as JSON")
    args = ap.parse_args()
    with private_postgres() if args.postgres else contextlib.nullcontext() as pg:
        if pg is not None:
            args.database_url = pg.url
        figures = measure(args, pg)
    report(args, figures)
    return 0


class Cpu:
    """Where the machine's CPU went since the last call, as shares of all its cores: the API
    processes, the grading worker, PostgreSQL, this process (the victim's and the hostile
    team's clients) and everything else on the machine (other work included)."""

    def __init__(self, svc: Running, pg):
        self.parties = {
            "api": lambda: descendants(svc.api.pid),
            "worker": lambda: descendants(svc.grading.pid) if svc.grading else [],
            "postgres": lambda: descendants(pg.postmaster()) if pg is not None else [],
        }
        self.cores = os.cpu_count() or 1
        self.last = self._now()

    def _now(self) -> dict[str, float]:
        me = resource.getrusage(resource.RUSAGE_SELF)
        now = {name: cpu_seconds(pids()) for name, pids in self.parties.items()}
        return {**now, "clients": me.ru_utime + me.ru_stime, "machine": machine_cpu(), "wall": time.monotonic()}

    def since(self) -> dict[str, float]:
        now, last = self._now(), self.last
        self.last = now
        whole = self.cores * (now["wall"] - last["wall"])
        used = {k: (now[k] - last[k]) / whole for k in now if k != "wall"}
        used["everything_else"] = used["machine"] - sum(v for k, v in used.items() if k != "machine")
        return {k: round(v, 3) for k, v in used.items()}


def measure(args: argparse.Namespace, pg=None) -> dict:
    lifted = str(10 * (args.batch + args.long_polls + 10_000))
    env = {
        "GRADER_CACHE": "false",
        "GRADER_DAILY_QUOTA": lifted,
        "GRADER_QUEUED_QUOTA": lifted,
        "GRADER_QUEUE_MAX": lifted,
    }
    with Running(env, database_url=args.database_url, workers=args.workers, prefix="grader-fairness.") as svc:
        victim = Victim(svc.url, svc.key("victim"))
        hostile = Hostile(svc.url, svc.key("hostile"), args)
        victim.rounds(5, 0.0, "warm")  # both API processes, the worker and the connection warm
        cpu = Cpu(svc, pg)
        t0 = time.monotonic()
        idle = victim.rounds(args.rounds, args.interval, "idle")
        idle_s = time.monotonic() - t0
        idle_cpu = cpu.since()
        began = time.monotonic()
        hostile.start()
        time.sleep(args.poll_delay + 1.0)  # the attack in place: the batch going in, the long-polls sent
        cpu.since()
        t1 = time.monotonic()
        attack = victim.rounds(args.rounds, args.interval, "attack", limit=args.attack_limit)
        attack_s = time.monotonic() - t1
        attack_cpu = cpu.since()
        hostile.finish(timeout=240)
        figures: dict = {
            "database": "sqlite" if args.database_url is None else args.database_url.split(":")[0],
            "rounds": args.rounds,
            "interval_s": args.interval,
            "idle_seconds": round(idle_s, 1),
            "attack_seconds": round(attack_s, 1),
            "target_ratio": TARGET,
            "victim": {},
            "cpu_share": {"idle": idle_cpu, "attack": attack_cpu},
        }
        worst = 0.0
        for kind in KINDS:
            a, b = [ms for ms, _, _ in idle[kind]], [ms for ms, _, _ in attack[kind]]
            ratio = percentile(b, 0.99) / max(percentile(a, 0.99), 1e-9) if a and b else None
            worst = max(worst, ratio or 0.0)
            figures["victim"][kind] = {
                "idle": summary(a),
                "attack": summary(b),
                "p99_ratio": round(ratio, 2) if ratio else None,
                "statuses_idle": dict(Counter(c for _, c, _ in idle[kind])),
                "statuses_attack": dict(Counter(c for _, c, _ in attack[kind])),
                # when the slowest were sent, in seconds after the attack began
                "slowest_attack": [[round(ms), round(at - began, 1)] for ms, _, at in sorted(attack[kind])[-3:][::-1]],
            }
        figures["worst_p99_ratio"] = round(worst, 2)
        if "ended" in hostile.batch:
            hostile.batch["answered_at"] = round(hostile.batch.pop("ended") - began, 1)
            hostile.batch.pop("began")
        figures["hostile"] = {
            "batch": hostile.batch,
            "statuses": {k: dict(v) for k, v in hostile.codes.items()},
            "long_polls": held_or_not(hostile.polls, at_once=1.0),
        }
    return figures


def cell(s: dict) -> str:
    return f"{s['p50_ms']:.0f} / {s['p99_ms']:.0f} / {s['max_ms']:.0f}" if s["n"] else "-"


def report(args: argparse.Namespace, figures: dict) -> None:
    out = ROOT / args.out if not args.out.startswith("/") else args.out
    OUT.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        json.dump(figures, f, indent=1)

    print(
        f"victim: a round (POST, GET, GET) every {args.interval:g} s, {args.rounds} rounds idle "
        f"({figures['idle_seconds']} s) and {figures['victim'][KINDS[2]]['attack']['n']} under attack "
        f"({figures['attack_seconds']} s); database {figures['database']}"
    )
    print(f"{'request':28} {'idle p50 / p99 / max ms':>26} {'attack p50 / p99 / max ms':>28} {'p99 ratio':>10}")
    for kind, f in figures["victim"].items():
        i, a = f["idle"], f["attack"]
        ratio = f"{f['p99_ratio']:.1f}x" if f["p99_ratio"] is not None else "-"
        print(f"{kind:28} {cell(i):>26} {cell(a):>28} {ratio:>10}")
        print(
            f"{'':28} slowest under attack: "
            + ", ".join(f"{ms:,} ms sent at +{at} s" for ms, at in f["slowest_attack"])
        )
        bad = {c: n for c, n in f["statuses_attack"].items() if not 200 <= c < 300}
        if bad:
            print(f"{'':28} under attack, answers other than 2xx: {bad} (0 = no answer within {TIMEOUT:.0f} s)")
    worst = figures["worst_p99_ratio"]
    verdict = "met" if worst <= TARGET else "NOT met"
    print(f"worst p99(attack) / p99(idle): {worst:.1f}x; target at most {TARGET:g}x: {verdict}")
    for phase, c in figures["cpu_share"].items():
        print(
            f"CPU of the machine's {os.cpu_count()} cores, {phase:6}: busy {c['machine']:.0%}: API {c['api']:.0%}, "
            f"worker {c['worker']:.0%}, PostgreSQL {c['postgres']:.0%}, the clients (this process) "
            f"{c['clients']:.0%}, everything else {c['everything_else']:.0%}"
        )
    h = figures["hostile"]
    print(
        f"hostile batch of {args.batch}: HTTP {h['batch'].get('status')}, accepted {h['batch'].get('accepted')} "
        f"in {h['batch'].get('seconds')} s (answered +{h['batch'].get('answered_at')} s after the attack began)"
    )
    for what, codes in h["statuses"].items():
        print(f"hostile {what:12} answers by status: {dict(sorted(codes.items()))}")
    lp = h["long_polls"]
    print(
        f"hostile long-polls: {lp['sent']} sent; held {lp['held']} ({lp['held_until_verdict']} until the verdict, "
        f"{lp['held_until_wait_ran_out']} until the wait ran out; seconds p50 / max "
        f"{lp['held_seconds_p50_max']}); answered at once {lp['answered_at_once']}: {lp['why_not_held']}"
    )


if __name__ == "__main__":
    sys.exit(main())
