#!/usr/bin/env python3
"""Independent fact counter for profiler traces (no gapscope).

Usage: count.py FILE [FILE...]   -> prints JSON facts per file.
Handles Kineto/Chrome-trace JSON (.json / .json.gz, dict with traceEvents or bare list)
and Nsight Systems SQLite exports (.sqlite).
"""
import gzip, json, re, sqlite3, sys, collections

STEPLIKE = re.compile(r'(ProfilerStep#\d+|execute_context|generation_|step|decode|prefill|forward|iteration|iter)', re.I)


def load_json(path):
    op = gzip.open if path.endswith('.gz') else open
    with op(path, 'rb') as f:
        raw = f.read()
    try:
        d = json.loads(raw)
    except json.JSONDecodeError:
        # some traces have trailing garbage / missing closing bracket
        txt = raw.decode('utf-8', 'replace').rstrip().rstrip(',')
        for suffix in ('', ']}', ']', '}]}'):
            try:
                d = json.loads(txt + suffix)
                break
            except json.JSONDecodeError:
                continue
        else:
            raise
    return d, len(raw)


def facts_json(path):
    d, usize = load_json(path)
    if isinstance(d, list):
        evs, meta = d, {}
    else:
        evs, meta = d.get('traceEvents', []), d
    cats = collections.Counter()
    kern_dur = collections.Counter()
    kern_cnt = collections.Counter()
    n_kernel = n_memcpy = n_memset = 0
    ann = collections.defaultdict(list)  # name-> durations
    prof_steps = []
    runtime = collections.Counter()
    streams = set()
    for e in evs:
        if not isinstance(e, dict):
            continue
        cat = str(e.get('cat', ''))
        cl = cat.lower()
        cats[cat] += 1
        ph = e.get('ph')
        name = str(e.get('name', ''))
        dur = e.get('dur', 0) or 0
        try:
            dur = float(dur)
        except (TypeError, ValueError):
            dur = 0.0
        if cl in ('cuda_runtime', 'runtime', 'cuda_driver') and 'graph' in name.lower():
            runtime[name] += 1
        if cl == 'kernel':
            a = e.get('args') or {}
            streams.add((e.get('pid'), a.get('stream', e.get('tid'))))
            n_kernel += 1
            kern_dur[name] += dur
            kern_cnt[name] += 1
        elif cl in ('gpu_memcpy', 'memcpy'):
            n_memcpy += 1
        elif cl in ('gpu_memset', 'memset'):
            n_memset += 1
        if cl in ('user_annotation', 'gpu_user_annotation') or name.startswith('ProfilerStep#'):
            ann[(cl, name)].append(dur)
    # group step-like annotation names by pattern (digits -> N)
    groups = collections.defaultdict(list)
    for (cl, name), durs in ann.items():
        key = (cl, re.sub(r'\d+', 'N', name))
        groups[key].extend(durs)
    steplike = {}
    for (cl, pat), durs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        steplike[f'{cl}:{pat}'] = {'count': len(durs), 'first_durs_us': [round(x, 1) for x in durs[:5]]}
    gpus = []
    for p in meta.get('deviceProperties', []) or []:
        gpus.append(p.get('name'))
    top = sorted(kern_dur.items(), key=lambda kv: -kv[1])[:15]
    total_k = sum(kern_dur.values())
    return {
        'file': path, 'uncompressed_bytes': usize, 'events': len(evs),
        'kernels': n_kernel, 'memcpy': n_memcpy, 'memset': n_memset,
        'categories': dict(cats.most_common(25)),
        'gpus': gpus,
        'kernel_streams': len(streams),
        'graph_runtime_calls': dict(runtime.most_common(5)),
        'schemaVersion': meta.get('schemaVersion'),
        'distributedInfo': meta.get('distributedInfo'),
        'annotations_distinct': len(ann),
        'annotation_groups': dict(list(steplike.items())[:25]),
        'kernel_total_us': round(total_k, 1),
        'top_kernels': [{'name': n[:140], 'count': kern_cnt[n], 'total_us': round(t, 1),
                         'pct': round(100 * t / total_k, 1) if total_k else 0} for n, t in top],
    }


def facts_sqlite(path):
    con = sqlite3.connect(path)
    cur = con.cursor()
    tables = [r[0] for r in cur.execute("select name from sqlite_master where type='table' order by name")]
    out = {'file': path, 'tables': tables}
    counts = {}
    for t in tables:
        if t.startswith('CUPTI') or t.startswith('NVTX') or t in ('StringIds', 'TARGET_INFO_GPU', 'TARGET_INFO_CUDA_DEVICE'):
            counts[t] = cur.execute(f'select count(*) from "{t}"').fetchone()[0]
    out['row_counts'] = counts
    def q(sql):
        try:
            return cur.execute(sql).fetchall()
        except sqlite3.Error as ex:
            return str(ex)
    out['kernels'] = counts.get('CUPTI_ACTIVITY_KIND_KERNEL', 0)
    out['memcpy'] = counts.get('CUPTI_ACTIVITY_KIND_MEMCPY', 0)
    out['memset'] = counts.get('CUPTI_ACTIVITY_KIND_MEMSET', 0)
    if 'CUPTI_ACTIVITY_KIND_KERNEL' in tables:
        cols = [r[1] for r in q('pragma table_info(CUPTI_ACTIVITY_KIND_KERNEL)')]
        namecol = 'shortName' if 'shortName' in cols else ('demangledName' if 'demangledName' in cols else None)
        if namecol:
            rows = q(f'select s.value, count(*), sum(k.end-k.start) as t from CUPTI_ACTIVITY_KIND_KERNEL k '
                     f'join StringIds s on s.id=k.{namecol} group by s.value order by t desc limit 15')
            if isinstance(rows, list):
                tot = q('select sum(end-start) from CUPTI_ACTIVITY_KIND_KERNEL')[0][0] or 1
                out['top_kernels'] = [{'name': r[0][:140], 'count': r[1], 'total_us': round(r[2] / 1000, 1),
                                       'pct': round(100 * r[2] / tot, 1)} for r in rows]
                out['kernel_total_us'] = round(tot / 1000, 1)
    if 'NVTX_EVENTS' in tables:
        rows = q("select coalesce(n.text, s.value) as nm, count(*), avg(n.end-n.start) from NVTX_EVENTS n "
                 "left join StringIds s on s.id=n.textId where n.end is not null group by nm order by 2 desc limit 25")
        if isinstance(rows, list):
            out['nvtx_ranges'] = [{'name': str(r[0])[:100], 'count': r[1], 'avg_us': round((r[2] or 0) / 1000, 1)} for r in rows]
        else:
            out['nvtx_ranges'] = rows
    for t in ('TARGET_INFO_GPU', 'TARGET_INFO_CUDA_DEVICE'):
        if t in tables:
            cols = [r[1] for r in q(f'pragma table_info({t})')]
            if 'name' in cols:
                out['gpus'] = [r[0] for r in q(f'select name from {t}')]
                break
    return out


def main():
    res = []
    for p in sys.argv[1:]:
        try:
            res.append(facts_sqlite(p) if p.endswith(('.sqlite', '.db')) else facts_json(p))
        except Exception as ex:  # report, keep going
            res.append({'file': p, 'error': repr(ex)})
    json.dump(res, sys.stdout, indent=1)
    print()


if __name__ == '__main__':
    main()
