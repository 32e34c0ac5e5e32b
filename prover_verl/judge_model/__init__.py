"""A judge model that answers: a tiny model trained on CPU to name the pivotal segment of a success/failure pair.

:mod:`~prover_verl.judge_model.pairs` plays an env that knows its pivot (``info["pivot_turn"]``, e.g. KeyDoor) into
success/failure pairs, :mod:`~prover_verl.judge_model.examples` renders them with the judge's own prompt
(:func:`prover_verl.judge.prompt.build_prompt`) and answer format, :mod:`~prover_verl.judge_model.scoring` scores
any judge on held-out pairs, and ``python -m prover_verl.judge_model.train --out DIR`` trains, scores and writes the
model directory that ``recipes/judge/serve_judge.sh`` serves to ``algorithm.prover.judge.type=openai``
(docs/method.md, "A judge model that answers").
"""
