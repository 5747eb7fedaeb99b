"""reranker-calibrate: the offline calibration tool.

It scores labelled query-document pairs through the served ``reranker`` ensemble (``reranker_client``), fits
every calibration method with scikit-learn, chooses one by out-of-fold log-loss, and writes a profile in the
server's format (``python_backends.calibrate.profiles`` / ``profile_schema``), which the ``rerank_calibrate`` model
applies with numpy alone. The dependencies run one way: this tool imports the server's profile format, the server
never imports the tool.

    reranker-calibrate fit | evaluate | old-stack | migrate | check ...    (or python -m reranker_calibrate)
"""
