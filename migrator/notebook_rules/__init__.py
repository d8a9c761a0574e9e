"""Notebook rules (NM470-NM479): what a notebook's cells hold as a whole, one module per code, with what
decides it; `migrator/notebook.py` reads the cells and hands each module what it decides on."""

from __future__ import annotations

import json

from migrator.rules import Example


def example(*cells: str) -> Example:
    """A notebook of code cells, as Jupyter writes it: an example's before or after (its `.before`)."""
    document = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": f"cell-{number}",
                "metadata": {},
                "outputs": [],
            }
            | {"source": source.splitlines(keepends=True)}
            for number, source in enumerate(cells, start=1)
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return Example(json.dumps(document, indent=1) + "\n", kind="notebook")
