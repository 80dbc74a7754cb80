"""Sequences on a stateful decoder under load (issue 39 item 6): CLIENTS threads, each with its own
tritonclient connection, run greedy generations as sequences (the prompt with `sequence_start`, then
one token per request on the server's state, the last with `sequence_end`) back to back for SECONDS
on Fixtures' LlamaDecoderInt4 (Apple's decoder form: inputIds, causalMask, key/value caches in
state). Every generation's tokens must equal the same prompt's generation by a single client before
the load, no request may fail, and the server's RSS must stay flat (the last third's peak within 10 %
of the first third's). Exits 1 otherwise.

Usage: sequence_soak.py MODELC CLIENTS SECONDS"""
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import tritonclient.http as triton

sys.path.insert(0, str(Path(__file__).parent))
import conftest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODEL = "LlamaDecoderInt4"
PROMPTS = [[(seed * 7 + i * 13) % 90 + 1 for i in range(3 + seed % 4)] for seed in range(16)]
NEW = 8


def step(client, sequence, tokens, end, start, last):
    """Feeds `tokens` at positions end - len(tokens) ..< end; returns the greedy next token."""
    count = len(tokens)
    ids = triton.InferInput("inputIds", [1, count], "INT32")
    ids.set_data_from_numpy(np.array([tokens], dtype=np.int32), binary_data=True)
    mask = np.zeros((1, 1, count, end), dtype=np.float16)
    for row in range(count):
        mask[0, 0, row, end - count + row + 1:] = -np.inf
    masks = triton.InferInput("causalMask", [1, 1, count, end], "FP16")
    masks.set_data_from_numpy(mask, binary_data=True)
    result = client.infer(MODEL, [ids, masks], sequence_id=sequence, sequence_start=start, sequence_end=last)
    return int(np.argmax(result.as_numpy("logits")[0, -1]))


def generate(client, sequence, prompt):
    tokens = list(prompt)
    token = step(client, sequence, tokens, len(tokens), True, False)
    generated = [token]
    for index in range(1, NEW):
        tokens.append(token)
        token = step(client, sequence, [token], len(tokens), False, index == NEW - 1)
        generated.append(token)
    return generated


def resident_kb(pid):
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def main():
    modelc, clients, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    conftest.MODELC = modelc
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models"
        models.mkdir()
        shutil.copytree(ROOT / "Fixtures/Models" / f"{MODEL}.mlpackage", models / f"{MODEL}.mlpackage")
        server = conftest.Server(models, tmp, "--max-sequences", str(2 * clients), "--sequence-idle-timeout", "30")
        try:
            single = triton.InferenceServerClient(server.url)
            reference = [generate(single, 1_000_000 + index, prompt) for index, prompt in enumerate(PROMPTS)]
            lock = threading.Lock()
            counts = {"generations": 0, "mismatches": 0, "failures": 0}
            samples = []
            deadline = time.monotonic() + seconds

            def client(index):
                connection = triton.InferenceServerClient(server.url)
                run = 0
                while time.monotonic() < deadline:
                    which = (index + run) % len(PROMPTS)
                    sequence = index * 1_000 + run + 1
                    run += 1
                    try:
                        tokens = generate(connection, sequence, PROMPTS[which])
                    except Exception as error:  # noqa: BLE001 - every failure is counted and shown
                        with lock:
                            counts["failures"] += 1
                            if counts["failures"] <= 3:
                                print(f"client {index}, sequence {sequence}: {error}", file=sys.stderr)
                        continue
                    with lock:
                        counts["generations"] += 1
                        counts["mismatches"] += tokens != reference[which]

            threads = [threading.Thread(target=client, args=(index,)) for index in range(clients)]
            started = time.monotonic()
            for thread in threads:
                thread.start()
            while any(thread.is_alive() for thread in threads):
                samples.append((time.monotonic() - started, resident_kb(server.process.pid)))
                time.sleep(0.25)
            for thread in threads:
                thread.join()
            # The store's own account: every sequence ended, no state left live.
            text = urllib.request.urlopen(f"http://{server.url}/metrics").read().decode()
            print("\n".join(line for line in text.splitlines() if line.startswith("modelc_sequence")))
        finally:
            code = server.stop()
    third = seconds / 3
    early = max((kb for at, kb in samples if at <= third), default=0)
    late = max((kb for at, kb in samples if at >= 2 * third), default=0)
    requests = counts["generations"] * NEW
    print(f"{clients} concurrent sequences for {seconds:.0f} s: {counts['generations']} generations ({requests} requests, "
          f"{requests / seconds:.0f}/s), {counts['mismatches']} with other tokens than a single client's, "
          f"{counts['failures']} failed; server RSS {early / 1024:.0f} MB in the first third, {late / 1024:.0f} MB in the last")
    marks = [max((kb for at, kb in samples if mark - 5 < at <= mark), default=0) for mark in range(5, int(seconds) + 1, 5)]
    print("server RSS every 5 s (MB): " + " ".join(f"{kb / 1024:.0f}" for kb in marks))
    flat = early > 0 and late <= early * 1.10
    if not flat:
        print("RSS grew over the soak", file=sys.stderr)
    return 0 if counts["mismatches"] == 0 and counts["failures"] == 0 and flat and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
