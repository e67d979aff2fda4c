"""Host A of the two-host tests: run in host A's network namespace, it supervises torchrun
(node 1 of 2) with the Python client, listening for host B's ranks on ADDRESS.
argv: ADDRESS SCRIPT CONFIG_JSON -- the torchrun arguments follow.
stdout: line 1 the JSON of job.remote_env(ADDRESS) (what host B exports), then the JSON
of the report when the job ends."""

import json
import sys

from trainbridge import bridge

address, script, config = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
job = bridge.launch(
    [sys.executable, "-m", "torch.distributed.run", *sys.argv[5:], script], **config
)
print(json.dumps(job.remote_env(address)), flush=True)
report = job.wait(300)
print(json.dumps(dict(report) if report is not None else None, default=str), flush=True)
