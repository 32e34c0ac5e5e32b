"""Search-QA (Search-R1 style): answer questions by searching a BM25 knowledge base; see :mod:`envs.searchqa.env`."""

from envs.searchqa.answer import exact_match, f1_score, normalize_answer
from envs.searchqa.dialect import parse_action
from envs.searchqa.env import SearchQAEnv

__all__ = ["SearchQAEnv", "exact_match", "f1_score", "normalize_answer", "parse_action"]
