"""Turning text into unit vectors for dense retrieval."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt


class Embedder(Protocol):
    model_id: str
    """Recorded with every vector, so a change of model is detected."""
    dim: int

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit-length row per text, shape (len(texts), dim)."""
        ...
