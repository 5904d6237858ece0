"""Every table and figure of the paper, built from recorded runs (called by the notebooks).

One module per concern; stage packages (:mod:`trek.trace`, :mod:`trek.ctrl`, :mod:`trek.rag`)
never import this package.

* :mod:`trek.report.wild` — Table 1 (accuracy with 95% intervals), Table 10, paired runs;
* :mod:`trek.report.search` — Table 5 (search configurations), Table 6 (native search vs proxy);
* :mod:`trek.report.trace` — Figure 2, Figure 3, Table A.4.2 (TrekTrace);
* :mod:`trek.report.ctrl_build` — Table 14, Table 2, Figure 4 (a Ctrl build);
* :mod:`trek.report.ctrl` — Tables 3, 7, 9 and Figures 5, 6 (Ctrl runs);
* :mod:`trek.report.costs` — Table 12;
* :mod:`trek.report.judge_audit` — the judge audit (beyond the paper): an LLM judge against the exact judge;
* :mod:`trek.report.titles` — titles naming the model and question set (DEMO DATA marks);
* :mod:`trek.report.latex` — CSV and LaTeX tables (pandas' Styler);
* :mod:`trek.report.palette` — one fixed colour per dataset, label, method and condition;
* :mod:`trek.report.figures` — the figure style, legends from what is drawn, PDF/PNG saving;
* :mod:`trek.report.paths` — repository-relative inputs and the output folders.

Importing this package imports nothing heavy; import the module you need.
"""
