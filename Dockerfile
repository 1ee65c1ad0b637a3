FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 UV_PROJECT_ENVIRONMENT=/opt/venv PATH=/opt/venv/bin:$PATH
RUN pip install --no-cache-dir uv && apt-get update && apt-get install -y --no-install-recommends \
      postgresql-client && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-install-project
COPY . .
RUN uv sync --frozen --no-dev --compile-bytecode && useradd --system --home /app arena && mkdir -p /app/var /app/keys && chown arena /app/var /app/keys && chmod 700 /app/keys
USER arena
EXPOSE 8000
CMD ["gunicorn", "arena.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "4"]
