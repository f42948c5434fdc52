"""The size options of the bank demo and its data generator, shared by every command that
takes them."""

from __future__ import annotations

import argparse


def positive(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_size_options(parser: argparse.ArgumentParser) -> None:
    """``--epochs``, ``--rows``, ``--accounts`` and ``--seed``, with the demo's defaults."""
    parser.add_argument("--epochs", type=positive, default=4, help="epochs to generate (default 4)")
    parser.add_argument("--rows", type=positive, default=2000, help="rows per epoch (default 2000)")
    parser.add_argument("--accounts", type=positive, default=200, help="accounts (default 200)")
    parser.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
