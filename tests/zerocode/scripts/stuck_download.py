# An unmodified script whose download stops at 0 B/s, the way a huggingface_hub download does
# on a network with no proxy: a tqdm bar named after the file, then no more bytes.
import threading

from tqdm import tqdm

with tqdm(total=4_000_000, desc="model.safetensors", unit="B", mininterval=0) as bar:
    bar.update(1_048_576)
    print("downloading model.safetensors", flush=True)
    threading.Event().wait()  # the socket never delivers another byte
