"""Host A of the two-host tests: run in host A's network namespace, it supervises
`CMD... SCRIPT` (torchrun, node 1 of 2) with the Python client, listening for host B's
ranks on ADDRESS. argv: ADDRESS CONFIG_JSON CMD...
stdout: line 1 the JSON of job.remote_env(ADDRESS) (what host B exports), then the JSON
of the report when the job ends, then {"client_cpu_s": this process's CPU time over the
job} (benchmarks/bench_ddp_hosts.py)."""

import json
import resource
import sys

from trainbridge import bridge

address, config = sys.argv[1], json.loads(sys.argv[2])


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


before = cpu_s()
job = bridge.launch(sys.argv[3:], **config)
print(json.dumps(job.remote_env(address)), flush=True)
report = job.wait(300)
print(json.dumps(dict(report) if report is not None else None, default=str), flush=True)
print(json.dumps({"client_cpu_s": cpu_s() - before}), flush=True)
