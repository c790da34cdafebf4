#!/usr/bin/env python3
"""callgrind-groups.py — where sluice's instructions per request go, by part of the program.

Usage:
  scripts/callgrind-groups.py N LABEL BIG SMALL [LABEL BIG SMALL …]

BIG and SMALL are callgrind profiles of sluice (one worker) that differ by N requests (bench.sh
--only instructions makes them); each LABEL becomes a column: the difference BIG − SMALL per
request, by group. Every instruction lands in exactly one group, so a column sums to the total:

  * an instruction whose source file (debug info, so inlined code counts where it was written) or,
    failing that, whose function belongs to a part of the program goes to that part: hyper and
    hyper-util; tokio, tokio-util and mio; mimalloc and the __rust_alloc shims (allocation);
    glibc's system-call wrappers and clock_gettime; sluice's src/http1 (the head gate),
    src/request and src/respond.rs (request handling; `sluice::server::conn::service`, the
    handler hyper calls, too), src/limiter, src/upstream, src/server and src/conn_state.rs (the
    connection loop, TimedIo's timeouts), logging (src/request/log.rs, src/accesslog, src/errlog,
    src/batch.rs), any other sluice module (config lookups, connlimit, client_body);
  * the rest is shared code — http (HeaderMap, HeaderName, HeaderValue), httparse, bytes, std,
    core, alloc, memcpy/memset, and sluice's own helpers src/headers, src/vars, src/fmt, src/body,
    src/clock — and is charged to its callers, in proportion to the instructions of each call
    (callgrind's caller edges), up the call graph to the first caller that belongs to a part: so
    httparse's request parsing is hyper's, its response parsing and the response's HeaderMap are
    src/upstream's, a memcpy is whoever copied.

hyper is split by its function: request head parsing (role::Server::parse, Buffered::parse,
poll_read_head, recv_msg), response head encoding (role::Server::encode, write_head, the Date
header, Encoder) and the rest (the dispatcher, read and write buffers, keep-alive). Below the
table, for each group, the shared code it was charged, and for allocation the groups that
allocate and free (its cost charged up the call graph as if shared), all of the first LABEL.
Needs callgrind_annotate (valgrind).
"""
import collections
import os
import re
import subprocess
import sys

LINE = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?([<*>])\s+(.*)$")
TOTAL = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?PROGRAM TOTALS")


def load(path):
    """A profile's self cost per (file, function), its caller edges and its total."""
    out = subprocess.run(
        ["callgrind_annotate", "--tree=caller", "--inclusive=no", "--threshold=100", "--auto=no",
         os.path.abspath(path)],
        capture_output=True, text=True, check=True, cwd="/").stdout  # "/": it shortens paths under its cwd
    self_ir, edges, total, callers = collections.Counter(), collections.Counter(), 0, []
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            t = TOTAL.match(line)
            if t:
                total = int(t.group(1).replace(",", ""))
            if not line.strip():
                callers = []
            continue
        ir, kind = int(m.group(1).replace(",", "")), m.group(2)
        where = re.sub(r"\s+\(\d[\d,]*x\)$", "", re.sub(r"\s+\[[^\]]*\]$", "", m.group(3)))
        file, _, fn = where.partition(":")
        if kind == "<":
            callers.append((file, fn, ir))
        elif kind == "*":
            self_ir[(file, fn)] += ir
            for cfile, cfn, c in callers:
                edges[(cfile, cfn, fn)] += c
            callers = []
    return total, self_ir, edges


HYPER = "hyper"  # split by hyper's function, below
HYPER_PARTS = [
    (r"role::Server as .*>::parse|Buffered<T,B>::parse|poll_read_head|recv_msg|te_is_trailers",
     "hyper: request head parse (httparse, HeaderMap, http::Request)"),
    (r"role::Server as .*>::encode|write_head|common::date|encode::Encoder", "hyper: response head encode"),
    (r"", "hyper: dispatch, read/write buffers, keep-alive"),
]
ALLOC = "allocation (mimalloc)"
SERVER = "server (src/server: connection loop, TimedIo)"
REQUEST = "request handling (src/request, respond)"
LOGGING = "logging (error log of rejections, batch)"
# sluice's own sources, as the profiles name them (the debug info of a build of this tree).
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src") + "/"
PARTS = [  # (source file pattern, function pattern, group); the first that matches. A pattern
    # starting with ^ is one of sluice's files, relative to src/; the others any other file.
    (r"^http1/", r"sluice::http1::", "head gate (src/http1)"),
    (r"^(request/log|accesslog|errlog|batch)", r"sluice::(request::log|accesslog|errlog|batch)::", LOGGING),
    (r"^(request/|respond)", r"sluice::(request|respond|server::conn::service)\b", REQUEST),
    (r"^limiter/", r"sluice::limiter::", "limiter (src/limiter)"),
    (r"^upstream/", r"sluice::upstream::", "upstream client (src/upstream)"),
    (r"^(server/|conn_state)", r"sluice::(server|conn_state)::", SERVER),
    (r"^(headers|vars|fmt|body|clock)", r"sluice::(headers|vars|fmt|body|clock)::", None),
    (r"^", r"sluice::", "other sluice (config lookups, connlimit, client_body)"),
    (r"/hyper(-util)?-[\d.]+/", r"hyper(_util)?::", HYPER),
    (r"/(tokio|tokio-util|mio)-[\d.]+/", r"(tokio|tokio_util|mio)::", "tokio runtime, timers, IO"),
    (r"mimalloc", r"(mi_|_mi_|__rust_(alloc|dealloc|realloc)|__rustc::__rust_(alloc|dealloc|realloc))",
     ALLOC),
    (r"sysdeps/unix/sysv/linux|/nptl/|clock_gettime", r"(recv|send|writev?|readv?|epoll_\w+|clock_gettime|__pthread_)",
     "libc system-call wrappers"),
]


def part(file, fn):
    """The group of an instruction by its file, else its function; None: shared code."""
    group = part_of_file(file, fn)
    if group == HYPER:
        return next(g for pat, g in HYPER_PARTS if re.search(pat, fn))
    return group


def part_of_file(file, fn):
    ours = file.startswith(SRC)
    for fpat, _, group in PARTS:
        if fpat.startswith("^") == ours and re.search(fpat, file[len(SRC):] if ours else file):
            return group if group else part_of_fn(fn)
    return part_of_fn(fn)


def part_of_fn(fn):
    name = fn.lstrip("<&")
    for _, npat, group in PARTS:
        if re.match(npat, name):
            return group if group != HYPER else next(g for pat, g in HYPER_PARTS if re.search(pat, fn))
    return None


def shared_name(file, fn):
    if "multiarch/mem" in file:
        return "memcpy/memset"
    name = fn.lstrip("<&")
    if name.startswith("sluice::"):
        return "sluice::" + name.split("::")[1]
    return name.split("::")[0] if "::" in name else name


def groups(n, big, small):
    tb, sb, eb = load(big)
    ts, ss, es = load(small)
    self_ir = {k: (sb[k] - ss[k]) / n for k in set(sb) | set(ss)}
    callers = collections.defaultdict(list)
    for (cfile, cfn, fn), c in eb.items():
        c = (c - es[(cfile, cfn, fn)]) / n
        if c > 0:
            callers[fn].append((cfile, cfn, c))
    memo = {}

    def share(fn, through=(), path=()):
        """How a shared function's cost splits over groups, through its callers (and through
        the groups in THROUGH, as if shared): a call from a function already on the way up
        (recursion) is left out, and the others weigh the more."""
        if (fn, through) in memo:
            return memo[(fn, through)], True
        edges = [(cfile, cfn, c) for cfile, cfn, c in callers.get(fn, []) if cfn != fn]
        whole = True
        split = collections.Counter()
        for cfile, cfn, c in edges:
            g = part(cfile, cfn)
            if g and g not in through:
                split[g] += c
            elif cfn in path:
                whole = False
            else:
                up, up_whole = share(cfn, through, path + (fn,))
                whole = whole and up_whole
                for g2, w in up.items():
                    split[g2] += w * c
        total = sum(split.values())
        split = {g: c / total for g, c in split.items()} if total > 0 else {"unattributed": 1.0}
        if whole:
            memo[(fn, through)] = split
        return split, whole

    by_group, charged = collections.Counter(), collections.defaultdict(collections.Counter)
    for (file, fn), c in self_ir.items():
        g = part(file, fn)
        if g:
            by_group[g] += c
            if g == ALLOC:
                for g2, w in share(fn, (ALLOC,))[0].items():
                    charged[ALLOC][g2] += c * w
        else:
            for g2, w in share(fn)[0].items():
                by_group[g2] += c * w
                charged[g2][shared_name(file, fn)] += c * w
    return (tb - ts) / n, by_group, charged


def main():
    if len(sys.argv) < 5 or (len(sys.argv) - 2) % 3:
        sys.exit(__doc__.split("\n\n")[1])
    n = int(sys.argv[1])
    runs = [(sys.argv[i], groups(n, sys.argv[i + 1], sys.argv[i + 2])) for i in range(2, len(sys.argv), 3)]
    names = sorted({g for _, (_, by, _) in runs for g in by}, key=lambda g: -runs[0][1][1][g])
    print(f"{'instructions per request':64s}" + "".join(f"{label:>16s}" for label, _ in runs))
    for g in names:
        if all(abs(by[g]) < 5 for _, (_, by, _) in runs):
            continue
        print(f"{g:64s}" + "".join(f"{by[g]:9.0f} {100 * by[g] / t:4.1f}%" for _, (t, by, _) in runs))
    print(f"{'total':64s}" + "".join(f"{t:9.0f} {100:4.0f}%" for _, (t, _, _) in runs))
    label, (_, _, charged) = runs[0]
    print(f"shared code charged to each group ({label}, instructions per request, the largest;"
          " for allocation: the groups that allocate and free):")
    for g in names:
        top = [f"{k} {v:.0f}" for k, v in charged[g].most_common(6) if v >= 10]
        if top:
            print(f"  {g}: {', '.join(top)}")


if __name__ == "__main__":
    main()
