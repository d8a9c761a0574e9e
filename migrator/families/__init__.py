"""Rewrite families, one module each. Order matters only where two families touch the same node:
XLA idioms first (device, step, collectives), then environment, training, inference."""

from migrator.families.environment import EnvironmentFamily
from migrator.families.inference import InferenceFamily
from migrator.families.training import TrainingFamily
from migrator.families.xla import XlaFamily

PYTHON_FAMILIES = (XlaFamily, EnvironmentFamily, TrainingFamily, InferenceFamily)
