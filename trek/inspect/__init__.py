"""Trek inside inspect_ai (the ``trek[inspect]`` extra): tasks, scorers and a search tool.

Registered through the ``inspect_ai`` entry point (:mod:`trek.inspect._registry`), so inspect
names them ``trek/...``:

* tasks ``trek/wild``, ``trek/mini``, ``trek/ctrl`` (:mod:`trek.inspect.tasks`);
* scorers ``trek/grade`` and ``trek/trektrace`` (:mod:`trek.inspect.scorers`);
* the tool ``trek/search`` (:mod:`trek.inspect.tools`).

The scorers read a sample as ``trek import inspect-ai`` does (:mod:`trek.inspect.transcript`) and
play Trek's model roles with inspect models (:mod:`trek.inspect.models`). ``import trek`` never
imports this package, and this module itself imports nothing of inspect_ai.
"""
