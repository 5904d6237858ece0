"""Test helpers for Trek: :mod:`trek.testing.fake_openai`, a fake OpenAI-compatible server.

Not part of the library's runtime: it needs the ``fake`` extra (``pip install 'trek[fake]'``,
included in ``trek[test]``). Import it as ``from trek.testing.fake_openai import FakeOpenAIServer``.
"""
