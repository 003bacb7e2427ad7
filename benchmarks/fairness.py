"""Another team's requests while a hostile team does its worst (issues 11 and 20).

Starts Redis, `grader serve` (gunicorn, its default processes and threads), a grading
worker and nginx in front of the API as `grader proxy config` makes it (the deployment
as shipped; SQLite in a temporary directory unless --database-url names an empty
database, --postgres a private PostgreSQL), makes two teams, hostile and victim, and for
each attack times the victim's requests one round after another at a steady rate (a
round every --interval seconds): POST /v1/submissions, GET /v1/submissions/<its id>,
GET /v1/account; --rounds rounds on the idle service, then as many under the attack,
both measured the same way in the same run. The victim and the hostile team connect from
two addresses of this machine (127.0.0.2 and 127.0.0.3), so that nginx's per-address
bounds count each apart. The attacks (--attacks, all by default):

- round1 (issue 11, straight to gunicorn as then): a batch of --batch items, --long-polls
  concurrent `POST ?wait=60` and two streams of 2 MiB patches;
- slow-direct, slow-proxy: 200 connections sending their headers a byte every 5 s and 200
  their body (half with the hostile team's key), straight to gunicorn (what `grader
  serve` alone does not protect: gunicorn's threads read requests themselves) and
  through nginx;
- chunked, chunked-proxy: two streams of 8 MiB bodies sent with Transfer-Encoding:
  chunked, straight to gunicorn (the API reads and pays for them itself) and through nginx
  (which reads them whole and passes them on with a Content-Length);
- archive (through nginx): 8 clients downloading the logs of the hostile team's run of
  --archive-patches refused patches of 768 KiB of random text again and again, every page;
- mass-publish (through nginx): the hostile team publishes --publish one-submission runs
  (its daily bound refuses most), then 10,000 public runs are written to the database as
  if published over months by a hundred teams, and 32 anonymous clients read the board
  four times a second each; the board's own read time (a keyed read: never the answer of
  another) is printed with 10 public runs and with 10,000.

It prints p50 / p99 / max of each request type, idle and under each attack, and
p99(attack) / p99(idle) against the target of 3 at most; what the hostile team got back;
and where the machine's CPU went in each phase (the API, the worker, nginx, PostgreSQL,
this process's clients, everything else): on a shared machine a ratio means little
without how much of the machine the service had.

Every patch is unique (the cache cannot answer) and cheap: refused by the vetting (a path
outside the repository), PATCH FAILED without a container, so this measures the service.
The hostile team's quotas are lifted (GRADER_DAILY_QUOTA, GRADER_QUEUED_QUOTA): what is
measured is whether its requests hold the API, not whether a quota stops them first.

    .venv/bin/python benchmarks/fairness.py
    .venv/bin/python benchmarks/fairness.py --attacks slow-direct,slow-proxy --rounds 60
    .venv/bin/python benchmarks/fairness.py --postgres      # a private PostgreSQL server (fsync off)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import secrets
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import requests

from _attacks import ChunkedStream, Downloaders, Readers, SlowClients, many_public_runs
from _service import (
    HOSTILE_ADDRESS,
    ROOT,
    TASK,
    VICTIM_ADDRESS,
    Proxy,
    Running,
    cheap_patch,
    cpu_seconds,
    descendants,
    machine_cpu,
    percentile,
    private_postgres,
    source_session,
)

OUT = ROOT / "benchmarks" / "out"
TARGET = 3.0  # the victim's p99 under attack, at most this many times its p99 idle
KINDS = ("POST /v1/submissions", "GET /v1/submissions/<id>", "GET /v1/account")
TIMEOUT = 120.0  # a victim request that takes longer counts as this long (and as a timeout)


class Victim:
    """One client, one keep-alive connection, one round after another."""

    def __init__(self, url: str, key: str, timeout: float = TIMEOUT):
        self.url, self.timeout = url, timeout
        self.http = source_session(VICTIM_ADDRESS, key)
        self.n = 0

    def _timed(self, method: str, path: str, **kw) -> tuple[float, int, float, dict | None]:
        """(milliseconds, status, when it was sent on the monotonic clock, the JSON body)."""
        t = time.monotonic()
        try:
            r = self.http.request(method, self.url + path, timeout=self.timeout, **kw)
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


ATTACKS = ("round1", "slow-direct", "slow-proxy", "chunked", "chunked-proxy", "archive", "mass-publish")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attacks", default=",".join(ATTACKS), help=f"which, comma-separated: {', '.join(ATTACKS)}")
    ap.add_argument("--rounds", type=int, default=60, help="victim rounds (POST, GET, GET) per phase")
    ap.add_argument("--interval", type=float, default=0.2, help="seconds from one victim round's start to the next's")
    ap.add_argument("--batch", type=int, default=10_000, help="round1: items in the hostile team's batch")
    ap.add_argument("--long-polls", type=int, default=200, help="round1: the hostile team's concurrent ?wait=60 POSTs")
    ap.add_argument("--streams", type=int, default=2, help="round1: senders of 2 MiB patches, one after another each")
    ap.add_argument(
        "--poll-delay", type=float, default=0.5, help="round1: seconds after the batch the long-polls start"
    )
    ap.add_argument("--archive-patches", type=int, default=200, help="archive: refused patches of 768 KiB in the run")
    ap.add_argument("--publish", type=int, default=1000, help="mass-publish: runs the hostile team tries to publish")
    ap.add_argument("--public-runs", type=int, default=10_000, help="mass-publish: public runs on the board")
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
    args.attacks = [a.strip() for a in args.attacks.split(",") if a.strip()]
    unknown = set(args.attacks) - set(ATTACKS)
    if unknown:
        ap.error(f"unknown attacks {sorted(unknown)}; they are {', '.join(ATTACKS)}")
    with private_postgres() if args.postgres else contextlib.nullcontext() as pg:
        if pg is not None:
            args.database_url = pg.url
        figures = measure(args, pg)
    report(args, figures)
    return 0


class Cpu:
    """Where the machine's CPU went since the last call, as shares of all its cores: the API
    processes, the grading worker, nginx, PostgreSQL, this process (the victim's and the
    hostile team's clients) and everything else on the machine (other work included)."""

    def __init__(self, svc: Running, pg, proxy: Proxy):
        self.parties = {
            "api": lambda: descendants(svc.api.pid),
            "worker": lambda: descendants(svc.grading.pid) if svc.grading else [],
            "nginx": lambda: descendants(proxy.pid),
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
        used["everything_else"] = max(0.0, used["machine"] - sum(v for k, v in used.items() if k != "machine"))
        return {k: round(v, 3) for k, v in used.items()}


class Attack:
    """How an attack is set up, started and stopped, and through which door it goes."""

    def __init__(self, name: str, via: str, summary: str, start, finish, report_):
        self.name, self.via, self.summary = name, via, summary
        self.start, self.finish, self.report = start, finish, report_


def _round1(svc: Running, key: str, args) -> Attack:
    hostile = Hostile(svc.url, key, args)

    def start() -> None:
        hostile.start()
        time.sleep(args.poll_delay + 1.0)  # the batch going in, the long-polls sent

    def report_() -> dict:
        batch = dict(hostile.batch)
        batch.pop("began", None)
        batch.pop("ended", None)
        return {
            "batch": batch,
            "statuses": {k: dict(v) for k, v in hostile.codes.items()},
            "long_polls": held_or_not(hostile.polls, at_once=1.0),
        }

    return Attack(
        "round1",
        "gunicorn",
        f"a batch of {args.batch}, {args.long_polls} long-polls, {args.streams} streams of 2 MiB patches",
        start,
        lambda: hostile.finish(timeout=240),
        report_,
    )


def _slow(url: str, via: str, key: str) -> Attack:
    slow = SlowClients(url, key, address=HOSTILE_ADDRESS)

    def start() -> None:
        slow.start()
        time.sleep(3.0)  # all 400 connected

    return Attack(
        f"slow-{'direct' if via == 'gunicorn' else 'proxy'}",
        via,
        "200 connections sending their headers a byte every 5 s, 200 their body (half with a key)",
        start,
        slow.finish,
        slow.report,
    )


def _chunked(url: str, via: str, key: str) -> Attack:
    stream = ChunkedStream(url, key)
    return Attack(
        "chunked" if via == "gunicorn" else "chunked-proxy",
        via,
        "two streams of 8 MiB bodies, Transfer-Encoding: chunked",
        stream.start,
        stream.finish,
        stream.report,
    )


def _archive(svc: Running, url: str, key: str, args) -> Attack:
    """The hostile team's run of large refused patches, graded, then 8 downloaders."""
    http = source_session(HOSTILE_ADDRESS, key)
    # random text, as a real patch is: an archive of it compresses about two to one
    items = [
        {
            "task_id": TASK,
            "patch": cheap_patch(f"logs-{i}") + "+" + secrets.token_hex(384 * 1024) + "\n",
            "run_id": "logs",
            "trial": i,  # a run holds one attempt per task and trial
        }
        for i in range(args.archive_patches)
    ]
    stored = 0
    for at in range(0, len(items), 40):  # 40 of 768 KiB: within a request's 64 MiB
        while True:
            r = http.post(f"{url}/v1/submissions/batch", json=items[at : at + 40], timeout=600)
            if r.status_code != 429:
                break
            time.sleep(float(r.headers.get("Retry-After", 1)))  # the team's bytes a second: wait its turn
        stored += r.json().get("accepted", 0)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # every one graded (PATCH FAILED, no container)
        run = http.get(f"{url}/v1/runs/logs", timeout=60).json()
        if run.get("submissions") == stored and not run.get("pending"):
            break
        time.sleep(1)
    downloaders = Downloaders(url, key, "logs")
    return Attack(
        "archive",
        "nginx",
        f"8 clients downloading the logs of a run of {stored} patches of 768 KiB, again and again",
        downloaders.start,
        downloaders.finish,
        downloaders.report,
    )


def _mass_publish(svc: Running, url: str, key: str, victim_key: str, args) -> tuple[Attack, dict]:
    """The hostile team publishing --publish runs through the API (its daily bound says
    no to most), then --public-runs public runs in the database; the board's read time
    (keyed: computed, never another's answer) before and after; 32 anonymous readers."""
    http = source_session(HOSTILE_ADDRESS, key)
    items = [{"task_id": TASK, "patch": cheap_patch(f"mass-{i}"), "run_id": f"mass-{i}"} for i in range(args.publish)]
    r = http.post(f"{url}/v1/submissions/batch", json=items, timeout=600)
    accepted = r.json().get("accepted", 0) if r.ok else 0
    published: Counter = Counter()
    first = None
    for i in range(args.publish):
        answer = http.patch(f"{url}/v1/runs/mass-{i}", json={"public": True}, timeout=60)
        published[answer.status_code] += 1
        if answer.status_code == 200 and first is None:
            first = f"mass-{i}"
    reader = source_session(VICTIM_ADDRESS, victim_key)

    def board_ms(rounds: int = 20) -> dict:
        out = {}
        for path in ("/v1/leaderboard", "/leaderboard"):
            ms = []
            for _ in range(rounds):
                t = time.monotonic()
                reader.get(f"{url}{path}", timeout=300)
                ms.append((time.monotonic() - t) * 1000)
            out[path] = summary(ms)
        return out

    time.sleep(3)  # the published runs graded
    before = board_ms()
    if first is not None:
        from grader.store.db import Database

        db = Database(svc.database_url)
        try:
            many_public_runs(db, args.public_runs, first, task=TASK, prefix="published")
        finally:
            db.dispose()
    reader.get(f"{url}/v1/leaderboard", timeout=300)  # whatever changed is computed once
    after = board_ms()
    readers = Readers(url)

    def report_() -> dict:
        return {**readers.report(), "batch_accepted": accepted}

    facts = {
        "publish_answers": dict(published),
        "board_read_ms": {"public_runs_before": before, f"public_runs_{args.public_runs}": after},
    }
    return (
        Attack(
            "mass-publish",
            "nginx",
            f"{args.publish} runs published by one team, {args.public_runs} public runs, 32 anonymous readers",
            readers.start,
            readers.finish,
            report_,
        ),
        facts,
    )


def measure(args: argparse.Namespace, pg=None) -> dict:
    lifted = str(10 * (args.batch + args.long_polls + 10_000))
    env = {
        "GRADER_CACHE": "false",
        "GRADER_DAILY_QUOTA": lifted,
        "GRADER_QUEUED_QUOTA": lifted,
        "GRADER_QUEUE_MAX": lifted,
        "GRADER_PROXIED": "true",
    }
    figures: dict = {
        "database": "sqlite" if args.database_url is None else args.database_url.split(":")[0],
        "rounds": args.rounds,
        "interval_s": args.interval,
        "target_ratio": TARGET,
        "attacks": {},
    }
    with (
        Running(env, database_url=args.database_url, workers=args.workers, prefix="grader-fairness.") as svc,
        Proxy(svc.url, {**svc.env}) as proxy,
    ):
        victim_key, hostile_key = svc.key("victim"), svc.key("hostile")
        cpu = Cpu(svc, pg, proxy)
        doors = {"gunicorn": svc.url, "nginx": proxy.url}
        for name in args.attacks:
            facts: dict = {}
            if name == "round1":
                attack = _round1(svc, hostile_key, args)
            elif name in ("slow-direct", "slow-proxy"):
                via = "gunicorn" if name == "slow-direct" else "nginx"
                attack = _slow(doors[via], via, hostile_key)
            elif name in ("chunked", "chunked-proxy"):
                via = "gunicorn" if name == "chunked" else "nginx"
                attack = _chunked(doors[via], via, hostile_key)
            elif name == "archive":
                attack = _archive(svc, proxy.url, hostile_key, args)
            else:
                attack, facts = _mass_publish(svc, proxy.url, hostile_key, victim_key, args)
            slow = name == "slow-direct"  # gunicorn's threads held: a victim request may never be answered
            victim = Victim(doors[attack.via], victim_key, timeout=15.0 if slow else TIMEOUT)
            print(f"[{name}] through {attack.via}: {attack.summary}", file=sys.stderr, flush=True)
            victim.rounds(5, 0.0, f"{name}-warm")
            cpu.since()
            t0 = time.monotonic()
            idle = victim.rounds(args.rounds, args.interval, f"{name}-idle")
            idle_s, idle_cpu = time.monotonic() - t0, cpu.since()
            attack.start()
            cpu.since()
            t1 = time.monotonic()
            under = victim.rounds(
                args.rounds, args.interval, f"{name}-attack", limit=60.0 if slow else args.attack_limit
            )
            attack_s, attack_cpu = time.monotonic() - t1, cpu.since()
            attack.finish()
            figures["attacks"][name] = {
                "via": attack.via,
                "summary": attack.summary,
                "idle_seconds": round(idle_s, 1),
                "attack_seconds": round(attack_s, 1),
                "victim": _victim_figures(idle, under),
                "cpu_share": {"idle": idle_cpu, "attack": attack_cpu},
                "hostile": attack.report(),
                **facts,
            }
            time.sleep(2.0)  # what the attack left in flight settles before the next idle phase
    return figures


def _victim_figures(idle: dict, under: dict) -> dict:
    out: dict = {}
    worst = 0.0
    for kind in KINDS:
        a, b = [ms for ms, _, _ in idle[kind]], [ms for ms, _, _ in under[kind]]
        ratio = percentile(b, 0.99) / max(percentile(a, 0.99), 1e-9) if a and b else None
        worst = max(worst, ratio or 0.0)
        out[kind] = {
            "idle": summary(a),
            "attack": summary(b),
            "p99_ratio": round(ratio, 2) if ratio else None,
            "statuses_idle": dict(Counter(c for _, c, _ in idle[kind])),
            "statuses_attack": dict(Counter(c for _, c, _ in under[kind])),
        }
    out["worst_p99_ratio"] = round(worst, 2)
    return out


def cell(s: dict) -> str:
    return f"{s['p50_ms']:.0f} / {s['p99_ms']:.0f} / {s['max_ms']:.0f}" if s["n"] else "-"


def report(args: argparse.Namespace, figures: dict) -> None:
    out = ROOT / args.out if not args.out.startswith("/") else args.out
    OUT.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        json.dump(figures, f, indent=1)
    print(
        f"victim: a round (POST, GET, GET) every {args.interval:g} s, {args.rounds} rounds idle and "
        f"{args.rounds} under each attack, idle measured just before it; database {figures['database']}; "
        f"{os.cpu_count()} cores"
    )
    for name, a in figures["attacks"].items():
        print(f"\n== {name} (through {a['via']}): {a['summary']}")
        print(f"{'request':28} {'idle p50 / p99 / max ms':>26} {'attack p50 / p99 / max ms':>28} {'p99 ratio':>10}")
        for kind in KINDS:
            f = a["victim"][kind]
            ratio = f"{f['p99_ratio']:.1f}x" if f["p99_ratio"] is not None else "-"
            print(f"{kind:28} {cell(f['idle']):>26} {cell(f['attack']):>28} {ratio:>10}")
            bad = {c: n for c, n in f["statuses_attack"].items() if not 200 <= c < 300}
            if bad:
                print(f"{'':28} under attack, answers other than 2xx: {bad} (0 = no answer in time)")
        worst = a["victim"]["worst_p99_ratio"]
        print(
            f"worst p99(attack) / p99(idle): {worst:.1f}x; target at most {TARGET:g}x: "
            + ("met" if worst <= TARGET else "NOT met")
        )
        for phase, c in a["cpu_share"].items():
            print(
                f"CPU, {phase:6}: busy {c['machine']:.0%}: API {c['api']:.0%}, worker {c['worker']:.0%}, "
                f"nginx {c['nginx']:.0%}, PostgreSQL {c['postgres']:.0%}, clients (this process) {c['clients']:.0%}, "
                f"everything else {c['everything_else']:.0%}"
            )
        print(f"hostile: {json.dumps(a['hostile'])}")
        for extra in ("publish_answers", "board_read_ms"):
            if extra in a:
                print(f"{extra}: {json.dumps(a[extra])}")


if __name__ == "__main__":
    sys.exit(main())
