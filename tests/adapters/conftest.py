from tests.backend_servers import (  # noqa: F401  (fixtures)
    moto_endpoint,
    postgres_backend,
    postgres_cluster,
    s3_backend,
    shared_backend,
)
