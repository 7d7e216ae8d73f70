# Multi-stage build of the operator: a static binary on a distroless, non-root base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY planner/ planner/
COPY executor/ executor/
COPY cmd/ cmd/
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/manager ./cmd/manager \
 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/kubectl-etcd ./cmd/kubectl-etcd

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/manager /manager
COPY --from=build /out/kubectl-etcd /kubectl-etcd
USER 65532:65532
ENTRYPOINT ["/manager"]
