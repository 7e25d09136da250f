"""Settings the Reporter tests open their Reporters with. A module of its own name:
`from conftest import` would find another folder's conftest."""

#: Test settings: quick retries, batches sent on flush() (or when full); report() raises
#: (strict) unless a test asks for the app's default (strict=False).
FAST = {
    "backoff_base": 0.02,
    "backoff_cap": 0.2,
    "max_batch_age": 3600.0,
    "timeout": 5.0,
    "strict": True,
}
