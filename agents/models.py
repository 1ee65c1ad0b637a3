"""Who competes: competitors, with the endpoint and key policy they are called under.

What they decide in a cohort (Decision, LLMCall, Forecast) belongs to the game, in cohorts."""

from django.core.exceptions import ValidationError
from django.db import models

from agents.simulated import is_loopback_url


class Competitor(models.Model):
    class Kind(models.TextChoices):
        LLM = "llm", "Language model"
        BASELINE = "baseline", "Baseline strategy"

    class Strategy(models.TextChoices):
        MARKET = "market", "Market (states the price, never bets)"
        CASH = "cash", "Cash (never bets)"
        RANDOM = "random", "Random (seeded)"
        FAVORITE = "favorite", "Favorite (backs the side above 0.5)"
        LONGSHOT_FADER = "longshot-fader", "Longshot fader"

    slug = models.SlugField(max_length=80, unique=True)
    display_name = models.CharField(max_length=120)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    family = models.CharField(max_length=40, blank=True, help_text="GPT, Gemini, Grok, Claude, ...")
    provider = models.CharField(
        max_length=60, blank=True, help_text="openrouter, vllm, ollama, ..."
    )
    model_id = models.CharField(max_length=200, blank=True)
    strategy = models.CharField(max_length=20, choices=Strategy.choices, blank=True)
    params = models.JSONField(
        default=dict, blank=True, help_text="temperature, max_tokens, reasoning, ..."
    )
    # Endpoint override: blank means settings.ARENA_LLM_BASE_URL / the default key.
    base_url = models.URLField(max_length=300, blank=True)
    api_key_env = models.CharField(
        max_length=100, blank=True, help_text="Name of the env var holding the key (never the key)"
    )
    # The prompt budget (agents/budget.py): blank = the server's context size (llama.cpp's
    # /props), or none known until a context refusal names it.
    context_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Context size in tokens (prompt + answer). Blank: ask the server; a prompt "
        "that would not fit shows fewer markets (the forecast sample always among them)",
    )
    structured_output = models.BooleanField(
        default=False,
        help_text="Send a json_schema (response_format) that requires a forecast for exactly the "
        "sample's markets, with bounded lists and reasoning: for servers that support it "
        "(llama.cpp, vLLM, OpenAI) and small models",
    )
    price_in_per_m = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    price_out_per_m = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    knowledge_cutoff = models.DateField(null=True, blank=True)
    replicates = models.PositiveSmallIntegerField(default=1)
    active = models.BooleanField(default=True)
    # Answered by the project's simulated endpoint, never by a real model: labelled "simulated"
    # on every page, API row and export; never sent an API key (agents/simulated.py).
    simulated = models.BooleanField(
        default=False,
        help_text="Answered by the built-in simulated endpoint (arena demo, arena simulated-llm), "
        "not a real model",
    )
    notes = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kind", "display_name"]

    def __str__(self) -> str:
        return self.display_name

    @property
    def is_llm(self) -> bool:
        return self.kind == self.Kind.LLM

    def clean(self) -> None:
        if not self.simulated:
            return
        errors = {}
        if self.kind != self.Kind.LLM:
            errors["kind"] = "A simulated competitor answers through the model path: kind LLM."
        if self.api_key_env:
            errors["api_key_env"] = "A simulated competitor never gets an API key."
        if self.base_url and not is_loopback_url(self.base_url):
            errors["base_url"] = "A simulated competitor only calls a loopback endpoint."
        if errors:
            raise ValidationError(errors)
