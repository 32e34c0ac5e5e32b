"""WebShop's :class:`~envs.spec.EnvSpec`."""

from envs.spec import EnvSpec, TableSpec

SPEC = EnvSpec(
    name="webshop",
    target="envs.webshop.env:WebShopEnv",
    train_split="train",
    val_split="test",
    system_prompt=(
        "You are a shopping agent in a text-based web shop (WebShop). Each turn you see the page and the valid "
        "actions: search[your query] on a search page, or click[an item in brackets]. Think briefly, then reply "
        "with exactly one action inside <action></action>."
    ),
    tagged_action=True,
    # score (mean purchase score x 100) and success rate (%); the reward is the score except under verl-agent's
    # protocol (10 for a win), and logs from before the score was logged have only the reward
    table=TableSpec(headline="success", totals={"score": "score|reward", "success": "won"}),
)
