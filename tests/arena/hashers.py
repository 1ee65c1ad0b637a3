"""A real password hasher that counts its work (tests compare the work of two code paths)."""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class CountingHasher(PBKDF2PasswordHasher):
    algorithm = "pbkdf2_counting"
    iterations = 1000  # cheap: the count is what tests read
    calls = 0

    def encode(self, password, salt, iterations=None):
        type(self).calls += 1
        return super().encode(password, salt, iterations)


class SlowEnoughHasher(PBKDF2PasswordHasher):
    """Tens of milliseconds per check: the window a concurrent burst used to slip through."""

    algorithm = "pbkdf2_slow_enough"
    iterations = 100_000
