"""Answering: the evaluated system answers each question, with or without search.

* :mod:`~trek.answering.runner`: the answering stage (:class:`AnswerStage`) on the stage executor;
* :mod:`~trek.answering.dry_run`: what a run would cost before it runs (``--dry-run``);
* :mod:`~trek.answering.wild`: ``trek wild run`` as one library call (:func:`run_wild`).

The search backends and the agent loop the system uses live in :mod:`trek.search`; the answer
prompts in :mod:`trek.answer_prompts` (the graders and probes render them too).
"""
