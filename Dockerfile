# The three binaries in one small, non-root image:
#   docker build -t kube-gang:dev .
# Build stage: the workspace, locked dependencies, release profile.
FROM rust:1.89-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p gang-scheduler -p gang-webhook -p kubectl-gang \
 && mkdir /out \
 && cp target/release/gang-scheduler target/release/gang-webhook target/release/kubectl-gang /out/

# Run stage: distroless (glibc, CA certificates, no shell), user 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/gang-scheduler"]
