"""passviz: browse, draw and report TileLang lowering traces recorded by irtrace.

``passviz TRACE`` opens the Textual pass browser (``passviz.app``), ``passviz dot`` draws the
pipeline with Graphviz (``passviz.drawing``) and ``passviz html`` writes one self-contained report
(``passviz.report``). Everything reads traces only; nothing here imports tilelang.
"""
