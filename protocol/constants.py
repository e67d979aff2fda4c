"""Protocol v1 constants: the version a peer announces, the size of a frame's MAC
(docs/PROTOCOL.md sections 3 and 7) and the packages whose versions a hello reports. Plain
values, no imports."""

PROTOCOL_MAJOR = 1
PROTOCOL_VERSION = "1.2"
SUPPORTED_MAJORS = (1,)  # a hello with another major gets `refuse` (PROTOCOL.md section 7)
MAC_SIZE = 32  # HMAC-SHA256, the second frame of every message

# The training stack whose versions a worker's hello reports (`packages`, with tqdm:
# worker/facts.py) and the doctor's probe reports (with what the worker itself needs:
# bridge/doctor/run.py). Distribution names, as importlib.metadata knows them.
TRAINING_PACKAGES = (
    "torch",
    "numpy",
    "transformers",
    "datasets",
    "accelerate",
    "peft",
    "safetensors",
    "diffusers",
    "huggingface_hub",
)
