"""bridge/job_leads.py's Leads on its own: who is present, who leads, who may leave, driven
with hellos and no process or hub. The rule itself (machine.choose_lead) is
vectors/lead.json's; the whole path is tests/client/test_lead.py's."""

from trainbridge.bridge.job_leads import Leads

TORCHRUN = {"pid": 100, "ppid": 1, "argv": ["torchrun", "--nproc-per-node=2", "train.py"]}
RANK0 = {"pid": 101, "ppid": 100, "rank": 0, "world_size": 2, "argv": ["train.py"]}
RANK1 = {"pid": 102, "ppid": 100, "rank": 1, "world_size": 2, "argv": ["train.py"]}


def not_loaded(present):
    return False


def test_the_launched_process_leads_once_it_said_hello():
    leads = Leads()
    assert not leads.elect(100, not_loaded) and leads.lead is None  # nobody has spoken
    leads.said_hello(b"w1", {"pid": 100, "ppid": 1, "argv": ["train.py"]})
    assert leads.elect(100, not_loaded)
    assert (leads.lead, leads.lead_pid) == (b"w1", 100)
    leads.said_hello(b"w2", {"pid": 200, "ppid": 100, "argv": ["helper.py"]})  # its child
    assert not leads.elect(100, not_loaded) and leads.lead == b"w1"


def test_a_launchers_rank_0_leads_and_hands_the_lead_back_when_it_leaves():
    leads = Leads()
    for rid, hello in ((b"l", TORCHRUN), (b"r1", RANK1), (b"r0", RANK0)):
        leads.said_hello(rid, hello)
    assert leads.elect(100, not_loaded) and (leads.lead, leads.lead_pid) == (b"r0", 101)
    assert leads.leave(b"r0", launched=100)
    assert leads.elect(100, not_loaded) and (leads.lead, leads.lead_pid) == (b"l", 100)
    assert list(leads.present) == [b"l", b"r1"]


def test_the_launched_process_and_the_unknown_never_leave():
    leads = Leads()
    leads.said_hello(b"l", TORCHRUN)
    assert not leads.leave(b"l", launched=100)  # its last words are the job's
    assert not leads.leave(b"never-said-hello", launched=100)
    assert list(leads.present) == [b"l"]


def test_a_launched_process_that_loaded_the_worker_is_waited_for():
    leads = Leads()
    leads.said_hello(b"c", {"pid": 300, "ppid": 100, "argv": ["child.py"]})  # read first
    assert not leads.elect(100, lambda present: True) and leads.lead is None
    assert leads.elect(100, not_loaded) and leads.lead == b"c"  # a stand-in, without a box
