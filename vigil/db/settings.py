"""The database section of the settings (``VIGIL_DATABASE__*``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, field_validator

ASYNC_DRIVERS = {("sqlite", "aiosqlite"), ("postgresql", "asyncpg"), ("postgresql", "psycopg")}


class DatabaseSettings(BaseModel):
    """The case store."""

    @field_validator("url")
    @classmethod
    def _usable_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        # Imported here: SQLAlchemy takes half a second to import, which commands without a database skip.
        import sqlalchemy as sa  # noqa: PLC0415

        try:
            url = sa.make_url(value)
        except sa.exc.ArgumentError as exc:
            raise ValueError(f"not a database URL ({exc})") from exc
        backend, _, driver = url.drivername.partition("+")
        if (backend, driver) not in ASYNC_DRIVERS:
            raise ValueError(
                f"{url.drivername!r} is not supported; use sqlite+aiosqlite:///PATH or "
                "postgresql+asyncpg://USER:PASSWORD@HOST/DB"
            )
        return value

    url: str | None = Field(
        default=None,
        description="SQLAlchemy async URL; default SQLite in the data dir. "
        "PostgreSQL: postgresql+asyncpg://user@host/db",
    )
    migrate_on_start: bool = True
    batch_max_events: int = Field(default=256, ge=1)
    pool_size: int = Field(default=5, ge=1)
    timeout_s: float = Field(default=5.0, gt=0)

    def url_in(self, data_dir: Path) -> str:
        """The database URL in force: the setting, or SQLite under ``data_dir``."""
        if self.url:
            return self.url
        return f"sqlite+aiosqlite:///{(data_dir / 'vigil.db').resolve()}"
