# Sourced by the builds that compile packages of the k8s.io/kubernetes module (sandbox/k8s/build.sh,
# sandbox/conformance/build.sh), after versions.env.

# k8s_upstream_gomod: prints the path of k8s.io/kubernetes's own go.mod at $KUBERNETES_VERSION (downloading it).
k8s_upstream_gomod() {
  go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p'
}

# k8s_gomod NAME [LINE...]: prints a go.mod for module NAME that requires k8s.io/kubernetes $KUBERNETES_VERSION,
# then each LINE, then a replace for each staging module: k8s.io/kubernetes names them v0.0.0, each is pointed at
# its published v0.<minor>.<patch>.
k8s_gomod() {
  local name="$1" upstream line staging_ver="v0.${KUBERNETES_VERSION#v1.}"
  shift
  upstream="$(k8s_upstream_gomod)"
  echo "module $name"
  echo "go $(sed -n 's/^go //p' "$upstream")"
  echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
  for line in "$@"; do echo "$line"; done
  sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#replace \1 => \1 '"$staging_ver"'#p' "$upstream"
}

# k8s_ldflags: -s -w and the version the binaries report (and the suite compares with the server's).
k8s_ldflags() {
  local minor="${KUBERNETES_VERSION#v1.}" flags="-s -w" pkg
  minor="${minor%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}
