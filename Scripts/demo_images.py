#!/usr/bin/env python3
"""Pictures of coloured balls for `make run`, written with the standard
library only (zlib PNG), deterministic for a seed.

Usage:
    demo_images.py train DIR [--count N] [--seed S]   DIR/LABEL/LABEL-I.png for the four labels
    demo_images.py samples DIR                        the sample photos classified by `make run`
                                                      (committed in Fixtures/Samples)

Each picture is a ball of the label's colour, of random size and place, on a
light, noisy, shaded background: a classifier of ball colours learns from
them, and its answers on the samples can be checked by eye.
"""

import argparse
import os
import random
import struct
import zlib

COLORS = {
    "red": (205, 45, 40),
    "green": (50, 165, 70),
    "blue": (45, 85, 205),
    "yellow": (225, 200, 45),
}
SIZE = 64


def png(path, width, height, pixels):
    def chunk(kind, payload):
        return (struct.pack(">I", len(payload)) + kind + payload
                + struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF))
    raw = b"".join(b"\x00" + bytes(pixels[y * width * 3:(y + 1) * width * 3]) for y in range(height))
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(data)


def ball(color, rng, size=SIZE):
    radius = rng.uniform(0.28, 0.42) * size
    cx = rng.uniform(radius, size - radius)
    cy = rng.uniform(radius, size - radius)
    tint = [rng.uniform(-25, 25) for _ in range(3)]
    pixels = []
    for y in range(size):
        for x in range(size):
            dx, dy = x - cx, y - cy
            inside = dx * dx + dy * dy <= radius * radius
            if inside:
                # Lit from the upper left.
                light = 1.15 - 0.35 * ((dx + dy) / (2 * radius) + 0.5)
                base = [c * light + t for c, t in zip(color, tint)]
            else:
                shade = 215 + 25 * y / size
                base = [shade - 10, shade - 5, shade]
            pixels += [max(0, min(255, int(v + rng.gauss(0, 9)))) for v in base]
    return pixels


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["train", "samples"])
    parser.add_argument("directory")
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if args.what == "train":
        rng = random.Random(args.seed)
        for label, color in COLORS.items():
            folder = os.path.join(args.directory, label)
            os.makedirs(folder, exist_ok=True)
            for index in range(args.count):
                png(os.path.join(folder, "%s-%02d.png" % (label, index)), SIZE, SIZE, ball(color, rng))
    else:
        rng = random.Random(2024)
        os.makedirs(args.directory, exist_ok=True)
        for name, label in [("ball-1", "red"), ("ball-2", "blue"), ("ball-3", "yellow"), ("ball-4", "green")]:
            png(os.path.join(args.directory, name + ".png"), SIZE, SIZE, ball(COLORS[label], rng))


if __name__ == "__main__":
    main()
