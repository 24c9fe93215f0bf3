"""The brain layer (seed 002): context for prompts, distillation, reasoning and routing; an LLM optional everywhere."""

from __future__ import annotations

from engramdb.brain.context import ContextBuilder
from engramdb.brain.distill import Distiller
from engramdb.brain.llm import LLM, LLMError, LLMNotConfigured, OpenAICompatibleLLM, llm_from_settings
from engramdb.brain.reason import Reasoner
from engramdb.brain.routing import RoutingConfig, RoutingService
from engramdb.brain.sentiment import reward_from_text

__all__ = [
    "LLM",
    "ContextBuilder",
    "Distiller",
    "LLMError",
    "LLMNotConfigured",
    "OpenAICompatibleLLM",
    "Reasoner",
    "RoutingConfig",
    "RoutingService",
    "llm_from_settings",
    "reward_from_text",
]
