#!/usr/bin/env python3
"""Load generator for `engramctl serve` (bench/bench_serve.sh): C concurrent clients send R
completion requests each over loopback; optionally runs a command repeatedly meanwhile (appends).
Prints one JSON line: errors, inconsistent responses, tokens/s, p50/p99 latency.

A response is inconsistent when its engram object contradicts itself (hits + misses != lookups,
prompt + generated != total) or the table state it names does: one table_generation must always
come with the same journal_commits/journal_entries, commits never go down as the generation goes
up, and a client never sees an older generation after a newer one."""
import argparse, json, subprocess, threading, time, urllib.request


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--url', required=True)
    ap.add_argument('--clients', type=int, default=8)
    ap.add_argument('--requests', type=int, default=50)
    ap.add_argument('--max-tokens', type=int, default=16)
    ap.add_argument('--prompts', required=True)
    ap.add_argument('--during', help='shell command run repeatedly while the load runs')
    ap.add_argument('--timeout', type=float, default=120)
    a = ap.parse_args()
    prompts = [l.rstrip('\n') for l in open(a.prompts) if l.strip()]
    lock = threading.Lock()
    lat, errors, bad = [], [], []
    tokens = [0]
    states = {}  # generation -> (commits, entries)
    stop = threading.Event()
    during_runs = [0]

    def check(r, last_gen):
        e = r['engram']
        if e['hits'] + e['misses'] != e['lookups']:
            return 'hits + misses != lookups'
        if e['prompt']['lookups'] + e['generated']['lookups'] != e['lookups']:
            return 'prompt + generated lookups != lookups'
        if r['usage']['total_tokens'] != r['usage']['prompt_tokens'] + r['usage']['completion_tokens']:
            return 'usage does not add up'
        g = e['table_generation']
        if g < last_gen:
            return 'generation went back from %d to %d' % (last_gen, g)
        st = (e['journal_commits'], e['journal_entries'])
        with lock:
            if states.setdefault(g, st) != st:
                return 'generation %d seen with %s and %s' % (g, states[g], st)
        return None

    def client(c):
        last_gen = 0
        for i in range(a.requests):
            body = json.dumps({'prompt': prompts[(c * a.requests + i) % len(prompts)],
                               'max_tokens': a.max_tokens, 'temperature': 0}).encode()
            req = urllib.request.Request(a.url + '/v1/completions', data=body,
                                         headers={'Content-Type': 'application/json'})
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(req, timeout=a.timeout) as f:
                    r = json.load(f)
            except Exception as ex:  # noqa: BLE001 - every failure counts as an error
                with lock:
                    errors.append(str(ex))
                continue
            dt = time.monotonic() - t0
            why = check(r, last_gen)
            last_gen = max(last_gen, r['engram']['table_generation'])
            with lock:
                lat.append(dt)
                tokens[0] += r['usage']['completion_tokens']
                if why:
                    bad.append(why)

    def during():
        while not stop.is_set():
            subprocess.run(a.during, shell=True, check=True)
            during_runs[0] += 1
            stop.wait(0.3)

    th = [threading.Thread(target=client, args=(c,)) for c in range(a.clients)]
    d = threading.Thread(target=during) if a.during else None
    t0 = time.monotonic()
    if d:
        d.start()
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.monotonic() - t0
    stop.set()
    if d:
        d.join()
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else 0.0
    print(json.dumps({'clients': a.clients, 'requests': a.clients * a.requests, 'errors': len(errors),
                      'inconsistent': len(bad), 'tokens': tokens[0], 'seconds': wall,
                      'tokens_per_s': tokens[0] / wall, 'p50_s': pct(0.50), 'p99_s': pct(0.99),
                      'generations_seen': len(states), 'during_runs': during_runs[0],
                      'first_error': errors[0] if errors else None,
                      'first_inconsistency': bad[0] if bad else None}))


if __name__ == '__main__':
    main()
