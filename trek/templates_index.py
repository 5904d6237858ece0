"""Every module that declares prompt templates, imported in one place.

Each of these modules calls :func:`trek.templates.register` for its templates when it is
imported. :func:`trek.templates.known_templates` (and so the check of a prompt folder's file
names) imports this module first, so every template is known before any of them is used. A new
module that registers templates is added here; ``tests/test_templates.py`` fails until it is.
"""

from trek import answer_prompts  # answer.*
from trek import contexts as render  # ctrl.render.*
from trek.ctrl import discovery, fabrication  # ctrl.discovery.*, ctrl.fabrication.*
from trek.graders import freshqa, generic, infodeepseek, sealqa  # grader.*
from trek.rag import answer, filter, rerank, structured  # rag.*
from trek.search import agent, openai_search, proxy  # agent.*, search.openai, search.proxy
from trek.trace import evidence, probes, queries, stale, verdict  # trace.*

#: The declaring modules, in the order above.
MODULES = (
    answer_prompts,
    discovery, fabrication, render,
    freshqa, generic, infodeepseek, sealqa,
    answer, filter, rerank, structured,
    agent, openai_search, proxy,
    evidence, probes, queries, stale, verdict,
)
